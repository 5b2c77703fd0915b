#!/usr/bin/env bash
# The soak (issue 43, part 4): one `broker serve` on a freshly migrated PostgreSQL (TCP,
# initdb's defaults) under MINUTES (30) of mixed traffic at half its measured capacity, then
# the requirements checked and a plot of RSS and p99 over time drawn.
#
# - Capacity: one 20 s round of the mix (soak.lua) with no pause first; the soak's rate is
#   half of what it answered (RATE=N sets it instead).
# - The mix, in one-minute wrk rounds (-t1 -c16; each connection pauses before each request,
#   adjusted after each round to hold the rate): Apple sign-ins (6 in 20) of 20,000 people who
#   signed in before and of new people (two in three returning), refresh rotations (13 in 20),
#   Apple server-to-server notifications (1 in 20, `email-enabled` of returning people). Every
#   round's identity tokens are minted before the soak starts (minting takes CPU); its
#   notifications, which the broker takes only fresh, just before it.
# - Beside it (soak.py): web sign-ins through the OpenID Connect code flow of `line` (WEB_RATE,
#   5 a second, each a new person), the tenant's webhook receiving every event, and a sample
#   every 5 s of the broker's RSS and open file descriptors and PostgreSQL's client connections.
# - At IMPORT_AT (minute 10): `broker import users` of a 100,000-person file (IMPORT_ACCOUNTS).
#
# Required (soak.py report): RSS grows less than 10 % after the first 5 minutes; the p99 of the
# last 5 minutes is within 20 % of the first 5; no request fails; the broker's open file
# descriptors and connections to PostgreSQL stay flat; every event reaches the webhook. The
# samples and rounds are kept beside the plot (PLOT without .png, -samples.tsv, -rounds.tsv).
# Usage: [BIN=DIR] [MINUTES=30] [RATE=N] [IMPORT_AT=10] [IMPORT_ACCOUNTS=100000] [WARMUP_MINUTES=5] [PLOT=docs/soak.png] Benchmarks/e2e/soak.sh
set -euo pipefail
export TARGET=tcp BROKER_WEBHOOK_ALLOW_INSECURE=1
source "$(dirname "$0")/lib.sh"
minutes=${MINUTES:-30}
import_at=${IMPORT_AT:-10}
import_accounts=${IMPORT_ACCOUNTS:-100000}
returning=20000
return_url=https://bench.example.com/done
plot=${PLOT:-$work/soak.png}
case "$plot" in /*) ;; *) plot=$PWD/$plot ;; esac

printf '%s\n' "$oidc_web_secret" >"$work/line-secret.txt"
"$bin/broker" provider enable line --tenant bench --type oidc --issuer "$oidc_issuer" --client-id bench-line \
    --client-secret-file "$work/line-secret.txt" --return-url "$return_url" --platforms ios,android,web >/dev/null
webhook_port=$(free_port)
"$bin/broker" webhook set --tenant bench --url "http://127.0.0.1:$webhook_port/hook" >/dev/null

OUT=$work BROKER_PID=$broker_pid PG_PORT=$pg_port BASE=$base IDP=$idp API_KEY=$API_KEY WEBHOOK_PORT=$webhook_port \
    RETURN_URL=$return_url python3 Benchmarks/e2e/soak.py run &
sampler=$!
echo "soak: $returning people sign in once (the returning ones)..." >&2
mint "$work/returning.txt" soak.r. "$returning"
signin_all "$work/returning.txt" >/dev/null
echo "soak: writing the $import_accounts-person import file..." >&2
python3 Benchmarks/import/generate.py --format jsonl --accounts "$import_accounts" --team BENCH00001 \
    --facebook-app "$facebook_app" --out "$work/import.jsonl"

# mint_round FILE N ROUND: N sign-in tokens, two in three for returning people (a random
# stretch of them), shuffled. Minting costs about 0.8 ms of CPU a token: every round's are
# minted before the soak (identity tokens live a day).
mint_round() {
    local file=$1 n=$2 round=$3
    mint "$file.r" soak.r. $(( n * 2 / 3 )) "$returning" $(( RANDOM * 7 % returning ))
    mint "$file.n" "soak.n$round." $(( n - n * 2 / 3 ))
    cat "$file.r" "$file.n" | shuf >"$file"
    rm -f "$file.r" "$file.n"
}
# mint_notifications FILE N: FILE.notifications, N / 5 notification bodies for returning people,
# minted just before their round (a notification minted ten minutes earlier is refused as stale).
mint_notifications() {
    "$bin/mock-idp" mint --provider apple --key-file "$work/idp-key.pem" --audience com.bench.app \
        --notification email-enabled --subject-prefix soak.r. --count $(( $2 / 5 )) --subjects "$returning" >"$1.notifications"
}
# round SECONDS DELAY_MS TOKENS: one wrk round; prints its RESULT.
round() {
    TOKENS=$3 NOTIFICATIONS=$3.notifications DELAY_MS=$2 wrk -t"$threads" -c"$connections" -d"$1s" --latency \
        -s Benchmarks/e2e/soak.lua "$base" | grep RESULT
}

echo "soak: capacity (20 s, no pause)..." >&2
mint_round "$work/round-0.txt" 30000 0
mint_notifications "$work/round-0.txt" 30000
capacity=$(round 20 0 "$work/round-0.txt")
echo "   capacity round: $capacity"
capacity_rps=$(sed -E 's/.* rps=([0-9]+).*/\1/' <<<"$capacity")
rate=${RATE:-$(( capacity_rps / 2 ))}
# Each connection's cycle is 16 ÷ rate seconds: the pause is that less the answer's time
# (unknown at first; each round corrects it).
delay=$(echo "$connections * 1000 / $rate" | bc -l)
# Sign-ins are 6 in 20 requests (soak.lua); half as many again as a round needs at the rate,
# because a round after a slow one runs faster than the rate (its shorter pause). With a tenth
# more, one round at 745/s of 630 ran out and sent 948 tokens a second time, answered as the
# replays they were.
per_round=$(( rate * 60 * 6 / 20 * 3 / 2 ))
echo "soak: minting $minutes rounds of $per_round sign-in tokens..." >&2
for i in $(seq "$minutes"); do mint_round "$work/round-$i.txt" "$per_round" "$i"; done
echo "soak: $minutes minutes at $rate requests/s (half of $capacity_rps)" >&2
date +%s.%N >"$work/soak.start"
: >"$work/rounds.tsv"
import_pid=
for i in $(seq "$minutes"); do
    if (( i == import_at + 1 )); then
        echo "   minute $import_at: broker import users ($import_accounts people) starts" >&2
        ( started=$(date +%s.%N)
          "$bin/broker" import users --tenant bench --from jsonl --file "$work/import.jsonl" --json >"$work/import.json" 2>"$work/import.err"
          echo "   the import ended after $(printf %.0f "$(echo "$(date +%s.%N) - $started" | bc)") s: $(tr -d ' \n' <"$work/import.json" | head -c 200)" >&2 ) &
        import_pid=$!
    fi
    mint_notifications "$work/round-$i.txt" "$per_round"
    result=$(round 60 "$(printf %.0f "$delay")" "$work/round-$i.txt")
    printf '%s\t%s\n' "$(date +%s.%N)" "$result" >>"$work/rounds.tsv"
    echo "   round $i: $result (pause $(printf %.0f "$delay") ms)" >&2
    rm -f "$work/round-$i.txt" "$work/round-$i.txt.notifications"
    achieved=$(sed -E 's/.* rps=([0-9]+).*/\1/' <<<"$result")
    # The cycle measured is 16 ÷ achieved; the answer's share of it is that less the pause.
    # The pause moves half way to what would have held the rate: one slow round (a checkpoint,
    # the import) does not swing the next one as far the other way.
    delay=$(echo "d = $connections * 1000 / $rate - ($connections * 1000 / $achieved - $delay); d = ($delay + d) / 2; if (d < 0) d = 0; d" | bc -l)
done
[ -n "$import_pid" ] && wait "$import_pid"
# The sampler and the web sign-ins stop; then every event of the tenant is counted for the
# webhook check (soak.py waits up to 60 s for the deliveries still on their way).
kill -TERM "$sampler"
for _ in $(seq 100); do [ -f "$work/loops.stopped" ] && break; sleep 0.1; done
psql_db "SELECT count(*) FROM events_outbox" >"$work/events.expected"
wait "$sampler" || true
echo "== the soak's figures"
OUT=$work PLOT=$plot python3 Benchmarks/e2e/soak.py report && status=0 || status=$?
# The samples and the rounds, beside the plot (the work folder goes with the run).
cp "$work/samples.tsv" "${plot%.png}-samples.tsv"
cp "$work/rounds.tsv" "${plot%.png}-rounds.tsv"
echo "== the broker's log (warnings and errors, by message):"
sed -E 's/^[^ ]+ +//; s/hb.request.id=[^ ]+ //' "$work/broker.log" | cut -c1-160 | sort | uniq -c | sort -rn | awk 'NR <= 15'
exit "$status"

#!/usr/bin/env bash
# End-to-end sign-in benchmark from the first second of a freshly migrated database: release
# broker, MockIdP as Apple, wrk on loopback (1 thread, 16 connections). No manual step: no
# statistics step, no tuning, no warm-up the product would not see. Scenarios, in this order:
#   new users       every request a new subject (account, identity and session created)
#   returning users people the first run created sign in again (each with a fresh token)
#   refresh         refresh-token rotation, each refresh token once
#   after restart   the people the first run created, each once, through a new broker process on
#                   the same database (as after a deploy: the process has signed none of them in)
# Prints one RESULT line per scenario, the accounts made and the broker's peak RSS.
# Usage: [TARGET=embedded|tcp] [POOL=N] [TRACES=1] [WALL=off] [POOLER=transaction|session] Benchmarks/e2e/run.sh [duration_seconds]
duration=${1:-20}
source "$(dirname "$0")/lib.sh"
new_tokens=${NEW_TOKENS:-60000}
returning_subjects=${RETURNING_SUBJECTS:-20000}

echo "target: $target; minting tokens..." >&2
mint "$work/new.txt" new. "$new_tokens"
# Returning people: subjects the new-user run creates first (it creates more than this many).
mint "$work/returning.txt" new. 80000 "$returning_subjects"
mint "$work/collect.txt" new. 50000 "$returning_subjects"

echo "== new users (${duration}s, $connections connections, at most $new_tokens, empty database)"
cpu_start
signin "$work/new.txt" "${duration}s"
sleep 1  # requests wrk left in flight are answered (and counted) before the next phase
created=$(psql_db "SELECT count(*) FROM accounts")
cpu_report "$created"
echo "   (accounts: $created)"
echo "== returning users (${duration}s, $connections connections, $returning_subjects people)"
cpu_start
signin "$work/returning.txt" "${duration}s" | tee "$work/returning.out"
cpu_report "$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' "$work/returning.out" | head -1)"
echo "   (accounts made by this run: $(( $(psql_db "SELECT count(*) FROM accounts") - created )))"

echo "== refresh (8s, $connections connections, each refresh token once)"
# Refresh tokens from an unmeasured 15 s run of returning sign-ins (more than 8 s of rotation
# uses: a run that ran out of tokens would count idle time), then each rotated once.
TOKENS="$work/collect.txt" SAVE_REFRESH="$work/refresh" wrk -t"$threads" -c"$connections" -d15s \
    -s Benchmarks/e2e/signin.lua "$base" >/dev/null
cat "$work"/refresh.* >"$work/refresh.txt"
echo "   ($(wc -l <"$work/refresh.txt") tokens)"
cpu_start
TOKENS="$work/refresh.txt" wrk -t"$threads" -c"$connections" -d8s --latency \
    -s Benchmarks/e2e/refresh.lua "$base" | grep RESULT | tee "$work/rotation.out"
cpu_report "$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' "$work/rotation.out" | head -1)"
echo "== broker peak RSS: $(peak_rss)"
echo "== returning users after a restart (5s, $connections connections, each of the $created people once at most)"
mint "$work/restarted.txt" new. "$created" "$created"
restart_broker
cpu_start
signin "$work/restarted.txt" 5s | tee "$work/restarted.out"
cpu_report "$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' "$work/restarted.out" | head -1)"
if [ -n "${TRACES:-}" ]; then echo "   (trace exports received: $(cat "$work/exports" 2>/dev/null || echo 0))"; fi

#!/usr/bin/env bash
# End-to-end sign-in benchmark: release broker on its embedded PostgreSQL, MockIdP as Apple,
# wrk on loopback with 16 connections. Prints one RESULT line per scenario and the broker's
# peak RSS. Scenarios: returning users (signing in again within seconds), new users,
# refresh-token rotation, and returning users whose last sign-in is over a minute old.
# Usage: Benchmarks/e2e/run.sh [duration_seconds]
set -euo pipefail
cd "$(dirname "$0")/../.."
duration=${1:-20}
connections=16
threads=2
new_tokens=${NEW_TOKENS:-60000}
scratch=.build-release
swift build -c release --scratch-path "$scratch" --product broker >/dev/null
swift build -c release --scratch-path "$scratch" --product mock-idp >/dev/null
bin=$(swift build -c release --scratch-path "$scratch" --show-bin-path)
work=$(mktemp -d /tmp/identitybroker-bench.XXXXXX)
chmod 711 "$work"
export BROKER_DATA_DIR="$work/data" BROKER_LOG_LEVEL=warning BROKER_LOG_FORMAT=text
export BROKER_APPLE_BASE_URL=http://127.0.0.1:9109 BROKER_PORT=8089
if [ -n "${POOL:-}" ]; then export BROKER_DB_POOL_SIZE=$POOL; fi
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

"$bin/mock-idp" serve --port 9109 --key-file "$work/idp-key.pem" >"$work/idp.log" 2>&1 &
pids+=($!)
openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | openssl pkcs8 -topk8 -nocrypt >"$work/AuthKey.p8"
"$bin/broker" tenant create bench >/dev/null
key=$("$bin/broker" api-key create --tenant bench 2>/dev/null)
"$bin/broker" apple team set --tenant bench --team-id BENCH00001 --key-id BENCHKEY01 --private-key-file "$work/AuthKey.p8" >/dev/null
"$bin/broker" apple group add --tenant bench --primary-app-id com.bench.app >/dev/null

"$bin/broker" serve >"$work/broker.log" 2>&1 &
broker_pid=$!
pids+=($broker_pid)
for _ in $(seq 100); do curl -sf http://127.0.0.1:8089/readyz >/dev/null && break; sleep 0.1; done

echo "minting tokens..." >&2
"$bin/mock-idp" mint --key-file "$work/idp-key.pem" --audience com.bench.app --count 1000 --subject-prefix returning. >"$work/returning.txt"
"$bin/mock-idp" mint --key-file "$work/idp-key.pem" --audience com.bench.app --count "$new_tokens" --subject-prefix new. >"$work/new.txt"

export API_KEY=$key CLIENT_ID=com.bench.app THREADS=$threads
# Warm up: every returning user signs in once (creates their accounts), and the caches fill.
TOKENS="$work/returning.txt" MODE=new wrk -t"$threads" -c"$connections" -d5s -s Benchmarks/e2e/signin.lua http://127.0.0.1:8089 >/dev/null
# Statistics as autovacuum leaves them within a minute of the data arriving. Until then the plans
# cached for the sign-in statement were made for empty tables and scan accounts and identities
# by tenant: measured ~1.2 ms of PostgreSQL CPU per sign-in instead of ~0.35 ms.
psql -h "$work/data/run" -U postgres -qc 'ANALYZE' postgres
TOKENS="$work/returning.txt" MODE=returning wrk -t"$threads" -c"$connections" -d5s -s Benchmarks/e2e/signin.lua http://127.0.0.1:8089 >/dev/null

echo "== returning users (${duration}s, $connections connections)"
TOKENS="$work/returning.txt" MODE=returning wrk -t"$threads" -c"$connections" -d"${duration}s" --latency \
    -s Benchmarks/e2e/signin.lua http://127.0.0.1:8089 | grep RESULT
echo "== new users (${duration}s, $connections connections, at most $new_tokens)"
TOKENS="$work/new.txt" MODE=new wrk -t"$threads" -c"$connections" -d"${duration}s" --latency \
    -s Benchmarks/e2e/signin.lua http://127.0.0.1:8089 | grep RESULT
new_done=$SECONDS
echo "== refresh (8s, $connections connections, each refresh token once)"
# Collect refresh tokens from an unmeasured 15 s run of returning sign-ins (more than 8 s of
# rotation uses: a run that ran out of tokens would count idle time), then rotate each once.
TOKENS="$work/returning.txt" MODE=returning SAVE_REFRESH="$work/refresh" wrk -t"$threads" -c"$connections" -d15s \
    -s Benchmarks/e2e/signin.lua http://127.0.0.1:8089 >/dev/null
cat "$work"/refresh.* >"$work/refresh.txt"
echo "   ($(wc -l <"$work/refresh.txt") tokens)"
TOKENS="$work/refresh.txt" wrk -t"$threads" -c"$connections" -d8s --latency \
    -s Benchmarks/e2e/refresh.lua http://127.0.0.1:8089 | grep RESULT
# The new users come back after more than a minute: every sign-in takes the full statement
# (stamps rewritten), not the quiet path of the first scenario (decision 0010). Only the first
# lines of new.txt are replayed, as many as the new-user run created accounts: 10 s uses about
# half of them, all from the part that run went through.
sleep $(( new_done + 65 > SECONDS ? new_done + 65 - SECONDS : 0 ))
created=$(psql -h "$work/data/run" -U postgres -Atc "SELECT count(*) FROM identities WHERE subject LIKE 'new.%'" postgres)
head -n "$created" "$work/new.txt" >"$work/stale.txt"
echo "== returning users, last sign-in over a minute ago (10s, $connections connections, at most $created)"
TOKENS="$work/stale.txt" MODE=new wrk -t"$threads" -c"$connections" -d10s --latency \
    -s Benchmarks/e2e/signin.lua http://127.0.0.1:8089 | grep RESULT
echo "   (accounts created by this run: $(( $(psql -h "$work/data/run" -U postgres -Atc "SELECT count(*) FROM identities WHERE subject LIKE 'new.%'" postgres) - created )))"
echo "== broker peak RSS: $(grep VmHWM /proc/$broker_pid/status | awk '{print $2, $3}')"
echo "== accounts: $(psql -h "$work/data/run" -U postgres -Atc 'select count(*) from accounts' postgres 2>/dev/null || echo '?')"

#!/usr/bin/env bash
# A PostgreSQL failover under load (issue 43, part 2): a primary with a synchronous streaming
# standby and Debian's HAProxy in front (standby.sh), one `broker serve` through HAProxy, and a
# steady load of sign-ins and refresh rotations, a reader of the events feed and a webhook
# receiver (failover.py). At KILL_AT (10 s) the primary is killed (SIGKILL to the postmaster and
# all its processes, as a machine that dies); PROMOTE_AFTER (2 s) later the standby is promoted
# (`pg_ctl promote`); HAProxy moves by itself; the broker is not restarted. failover.py prints
# what was answered when, checks the rows on the new primary, the feed and the webhooks, and
# exits non-zero when a requirement is not met. Then a new API key, revoked on the new primary,
# must be refused by the running broker (its LISTEN connection came back). On a failure the
# script prints the new primary's webhook state and keeps the broker's log in
# /tmp/failover-broker.log (BROKER_LOG_LEVEL=debug for more).
# Usage: [BIN=DIR] [DURATION=40] [KILL_AT=10] [PROMOTE_AFTER=2] [SIGNIN_RATE=200] Benchmarks/e2e/failover.sh
set -euo pipefail
export TARGET=tcp STANDBY=1 BROKER_WEBHOOK_ALLOW_INSECURE=1
source "$(dirname "$0")/lib.sh"
duration=${DURATION:-40}

webhook_port=$(free_port)
"$bin/broker" webhook set --tenant bench --url "http://127.0.0.1:$webhook_port/hook" >/dev/null
# Sign-ins at SIGNIN_RATE a second for the whole run: two tokens in three for a new person, the
# third for one who signed in before.
count=$(( duration * ${SIGNIN_RATE:-200} ))
echo "failover: minting $count tokens..." >&2
mint "$work/tokens.txt" failover. "$count" $(( count * 2 / 3 ))
# The postmaster and every process it started, at once, as a machine that dies.
kill_cmd="kill -KILL $primary_pid \$(pgrep -P $primary_pid)"
promote_cmd="$pg_bin/pg_ctl -D $standby_dir -w -s promote"
[[ $(id -u) -eq 0 ]] && promote_cmd="runuser -u postgres -- $promote_cmd"
BASE=$base TOKENS=$work/tokens.txt DURATION=$duration WEBHOOK_PORT=$webhook_port OUT=$work \
    PSQL="psql -h 127.0.0.1 -p $pg_port -U postgres -d postgres" \
    KILL_CMD=$kill_cmd PROMOTE_CMD=$promote_cmd REQUEST_TIMEOUT=${BROKER_REQUEST_TIMEOUT:-10} \
    python3 Benchmarks/e2e/failover.py && status=0 || status=$?
if [ "$status" != 0 ]; then
    echo "== on the new primary, for the diagnosis:"
    psql_db "SELECT 'deliveries ' || status || ': ' || count(*) || ', due ' || min(next_attempt_at) || ' to ' || max(next_attempt_at)
            FROM webhook_deliveries GROUP BY status" || true
    psql_db "SELECT 'webhook cursor ' || cursor_tx || '.' || cursor_id || ' enabled ' || enabled FROM webhooks" || true
    psql_db "SELECT 'events to ' || max(tx) || '.' || max(id) || ', snapshot xmin ' || pg_snapshot_xmin(pg_current_snapshot()) FROM events_outbox" || true
    psql_db "SELECT 'backend ' || pid || ' ' || coalesce(state, '') || ' since ' || coalesce(xact_start::text, '-') || ' ' ||
            coalesce(wait_event, '') || ' ' || left(regexp_replace(query, '\s+', ' ', 'g'), 100)
            FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()" || true
    echo "== the broker's log about webhooks (last 20):"
    grep -i "webhook" "$work/broker.log" | tail -20 || true
    cp "$work/broker.log" /tmp/failover-broker.log
fi
# The cache invalidations' LISTEN follows the switch too: a key the broker has cached, revoked
# on the new primary, is refused within seconds (the listener reconnects by itself).
created=$("$bin/broker" api-key create --tenant bench --name after-failover --json)
late_key=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["key"])' <<<"$created")
late_id=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])' <<<"$created")
key_status() { curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $late_key" "$base/v1/events?limit=1"; }
echo "== a new API key: $(key_status) before its revocation"
"$bin/broker" api-key revoke --tenant bench "$late_id" >/dev/null
revoked=$(date +%s.%N)
while [ "$(key_status)" = 200 ] && (( $(echo "$(date +%s.%N) - $revoked < 10" | bc) )); do sleep 0.05; done
refused_after=$(echo "$(date +%s.%N) - $revoked" | bc)
echo "   revoked on the new primary: answered $(key_status) after ${refused_after} s"
if [ "$(key_status)" = 200 ]; then echo "FAILED: the revoked key still works (the LISTEN connection did not come back)"; status=1; fi
echo "== answers per second after the kill (status: count):"
cat "$work/failover-timeline.txt"
echo "== the broker's log (warnings and errors, by message):"
sed -E 's/^[^ ]+ +//; s/hb.request.id=[^ ]+ //' "$work/broker.log" | cut -c1-160 | sort | uniq -c | sort -rn | awk 'NR <= 15'
echo "== HAProxy: $(grep -c 'is DOWN' "$work/haproxy-pg.log" || true) server(s) marked down"
exit "$status"

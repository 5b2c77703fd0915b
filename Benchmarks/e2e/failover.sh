#!/usr/bin/env bash
# A PostgreSQL failover under load (issue 43, part 2): a primary with a synchronous streaming
# standby and Debian's HAProxy in front (standby.sh), one `broker serve` through HAProxy, and a
# steady load of sign-ins and refresh rotations, a reader of the events feed and a webhook
# receiver (failover.py). At KILL_AT (10 s) the primary is killed (SIGKILL to the postmaster and
# all its processes, as a machine that dies); PROMOTE_AFTER (2 s) later the standby is promoted
# (`pg_ctl promote`); HAProxy moves by itself; the broker is not restarted. failover.py prints
# what was answered when, checks the rows on the new primary, the feed and the webhooks, and
# exits non-zero when a requirement is not met.
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
echo "== answers per second after the kill (status: count):"
cat "$work/failover-timeline.txt"
echo "== the broker's log (warnings and errors, by message):"
sed -E 's/^[^ ]+ +//' "$work/broker.log" | cut -c1-160 | sort | uniq -c | sort -rn | head -15
echo "== HAProxy: $(grep -c 'is DOWN' "$work/haproxy-pg.log" || true) server(s) marked down"
exit "$status"

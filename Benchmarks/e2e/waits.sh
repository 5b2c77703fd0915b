#!/usr/bin/env bash
# What PostgreSQL's backends are doing while the broker signs people in: 10 s of new Apple
# sign-ins, then 10 s of returning sign-ins of 10,000 of those people (as sign-in-cpu.sh), and in
# the middle of each phase SAMPLES looks (3,000 by default, one psql session, about one every
# millisecond) at the backends of the role the broker serves as that are not idle, counted by
# `wait_event_type:wait_event:state` ("-:-:active" is a backend running or waiting for a core).
# Found the commit's WAL flush in about half of the active samples (decision 0096).
# Usage: [BIN=DIR] [WALL=off] [SAMPLES=3000] [PG_EXTRA_OPTS="-c name=value"] Benchmarks/e2e/waits.sh
export TARGET=tcp
source "$(dirname "$0")/lib.sh"
# The role the broker connects as (broker_serve, or the superuser with WALL=off), read from the
# URL lib.sh gave it; the looks' own session is left out.
role=${DATABASE_URL#postgres://} role=${role%%@*}
look="SELECT coalesce(wait_event_type, '-') || ':' || coalesce(wait_event, '-') || ':' || state
    FROM pg_stat_activity WHERE usename = '$role' AND state <> 'idle' AND pid <> pg_backend_pid();"
for _ in $(seq "${SAMPLES:-3000}"); do echo "$look"; done >"$work/looks.sql"
# sample SECONDS_IN: after SECONDS_IN seconds, the looks, counted.
sample() {
    sleep "$1"
    psql -h 127.0.0.1 -p "$pg_port" -U postgres -AtqX -f "$work/looks.sql" postgres | sort | uniq -c | sort -rn |
        awk -v n="${SAMPLES:-3000}" '{ c = $1; $1 = ""; printf "   %6d  %5.1f %% of looks %s\n", c, 100 * c / n, $0 }'
}
mint "$work/new.txt" new. 40000
mint "$work/returning.txt" new. 80000 10000 7
echo "== new users (10s, $connections connections), backends of $role"
sample 2 >"$work/new.waits" &
sampler=$!
signin "$work/new.txt" 10s
wait "$sampler"
cat "$work/new.waits"
echo "== returning users (10s, $connections connections, 10000 people), backends of $role"
sample 2 >"$work/returning.waits" &
sampler=$!
signin "$work/returning.txt" 10s
wait "$sampler"
cat "$work/returning.waits"

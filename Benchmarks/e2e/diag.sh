#!/usr/bin/env bash
# Which statements a sign-in spends PostgreSQL's time on, on a PostgreSQL of its own with
# pg_stat_statements loaded (nested statements too: the foreign keys' checks). PHASE=new (the
# default): 10 s of new Apple sign-ins, as run.sh's first phase, then the twelve costliest
# statements (calls, total and mean milliseconds, buffers and WAL records a call).
# PHASE=returning: 8 s of new sign-ins unmeasured, then 8 s of returning sign-ins of 10,000 of
# those people, then 6 s of refresh rotations (tokens from an unmeasured 10 s run), each
# measured apart and listed by calls: how many statements, round trips and buffers each request
# costs (a batch statement's calls are batches; divide the requests by them for its size), and
# how often PostgreSQL planned each (`plans`: a prepared statement plans again only after an
# ANALYZE or a schema change; as many plans as calls is a statement planned every time).
# With PLANS=FILE, auto_explain also logs the plan of every statement over 3 ms (PLANS_MS), with
# its row counts and buffers, to FILE; PLANS_MS=0 PLANS_RATE=0.01 logs one statement in a
# hundred, however fast (where a returning batch's buffers go). Found the email lookup that
# row-level security turned into a scan (decision 0054).
# Usage: [WALL=off] [PHASE=new|returning] [PLANS=FILE [PLANS_MS=3] [PLANS_RATE=1]] [BIN=DIR] Benchmarks/e2e/diag.sh
export TARGET=tcp
PG_EXTRA_OPTS="-c shared_preload_libraries=pg_stat_statements${PLANS:+,auto_explain -c auto_explain.log_min_duration=${PLANS_MS:-3} -c auto_explain.sample_rate=${PLANS_RATE:-1} -c auto_explain.log_analyze=on -c auto_explain.log_buffers=on} -c pg_stat_statements.track=all -c pg_stat_statements.track_planning=on"
export PG_EXTRA_OPTS
source "$(dirname "$0")/lib.sh"
pg() { psql -h 127.0.0.1 -p "$pg_port" -U postgres "$@" postgres; }
pg -qc "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
# statements ORDER: what PostgreSQL ran since the last reset, twelve rows.
statements() {
    pg -c "SELECT calls, plans, round(total_plan_time::numeric, 0) AS plan_ms, round(total_exec_time::numeric, 0) AS total_ms, round(mean_exec_time::numeric, 3) AS mean_ms,
        shared_blks_hit / greatest(calls, 1) AS buffers_a_call, wal_records / greatest(calls, 1) AS wal_a_call,
        left(regexp_replace(query, '\s+', ' ', 'g'), 110) AS statement
        FROM pg_stat_statements ORDER BY $1 DESC LIMIT 12"
}
case "${PHASE:-new}" in
new)
    mint "$work/new.txt" new. 20000
    pg -qc "SELECT pg_stat_statements_reset()" >/dev/null
    signin "$work/new.txt" 10s
    statements total_exec_time
    ;;
returning)
    mint "$work/new.txt" new. 20000
    mint "$work/returning.txt" new. 80000 10000
    mint "$work/collect.txt" new. 50000 10000
    signin "$work/new.txt" 8s >/dev/null
    pg -qc "SELECT pg_stat_statements_reset()" >/dev/null
    echo "== returning sign-ins"
    signin "$work/returning.txt" 8s
    statements calls
    TOKENS="$work/collect.txt" SAVE_REFRESH="$work/refresh" wrk -t1 -c16 -d10s -s Benchmarks/e2e/signin.lua "$base" >/dev/null
    cat "$work"/refresh.* >"$work/refresh.txt"
    pg -qc "SELECT pg_stat_statements_reset()" >/dev/null
    echo "== refresh rotations"
    hot() { psql_db "SELECT n_tup_upd || ' ' || n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'sessions'"; }
    before=$(hot)
    TOKENS="$work/refresh.txt" wrk -t1 -c16 -d6s --latency -s Benchmarks/e2e/refresh.lua "$base" | grep RESULT
    statements calls
    # The rotations' updates of sessions, and how many of them stayed on their page without a
    # new index entry (HOT; the statistics are sent at the end of each transaction).
    sleep 1
    read -r u0 h0 <<<"$before"
    read -r u1 h1 <<<"$(hot)"
    echo "   (sessions updated: $((u1 - u0)), of them HOT: $((h1 - h0)))"
    ;;
*) echo "PHASE must be new or returning" >&2; exit 2 ;;
esac
if [ -n "${PLANS:-}" ]; then cp "$work/pg/server.log" "$PLANS"; fi

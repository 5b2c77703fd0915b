#!/usr/bin/env bash
# Which statements a sign-in spends PostgreSQL's time on: 10 s of new Apple sign-ins (as run.sh's
# first phase) on a PostgreSQL of its own with pg_stat_statements loaded, then its twelve
# costliest statements (calls, total and mean milliseconds, buffers a call). With PLANS=FILE,
# auto_explain also logs the plan of every statement over 3 ms, with its row counts and buffers,
# to FILE. Found the email lookup that row-level security turned into a scan (decision 0054).
# Usage: [WALL=off] [PLANS=FILE] Benchmarks/e2e/diag.sh
export TARGET=tcp
PG_EXTRA_OPTS="-c shared_preload_libraries=pg_stat_statements${PLANS:+,auto_explain -c auto_explain.log_min_duration=3 -c auto_explain.log_analyze=on -c auto_explain.log_buffers=on}"
export PG_EXTRA_OPTS
source "$(dirname "$0")/lib.sh"
pg() { psql -h 127.0.0.1 -p "$pg_port" -U postgres "$@" postgres; }
pg -qc "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
mint "$work/new.txt" new. 20000
pg -qc "SELECT pg_stat_statements_reset()" >/dev/null
signin "$work/new.txt" 10s
pg -c "SELECT calls, round(total_exec_time::numeric, 0) AS total_ms, round(mean_exec_time::numeric, 3) AS mean_ms,
    shared_blks_hit / greatest(calls, 1) AS buffers_a_call, left(regexp_replace(query, '\s+', ' ', 'g'), 120) AS statement
    FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 12"
if [ -n "${PLANS:-}" ]; then cp "$work/pg/server.log" "$PLANS"; fi

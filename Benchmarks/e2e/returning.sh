#!/usr/bin/env bash
# Returning users on a database an earlier run grew (KEEP, embedded default): the same measure
# as growth.sh's last phase, repeatable against one database, to compare builds at a million
# accounts without growing one each time. A first pass signs the people in once, unmeasured:
# the new broker process learns them (its quiet-path hint starts empty, decision 0022). Then
# PASSES measured passes, each with fresh tokens for the same people, each printing the rate,
# the broker's and PostgreSQL's CPU per sign-in, the pages each relation read outside
# shared_buffers and the WAL written (with its full-page images, after a checkpoint).
# Usage: KEEP=DIR [RETURNING=N] [PASSES=N] Benchmarks/e2e/returning.sh
#   (grow DIR first: KEEP=DIR Benchmarks/e2e/growth.sh)
[ -n "${KEEP:-}" ] || { echo "returning.sh: set KEEP to the folder of a database growth.sh grew" >&2; exit 2; }
[ -d "$KEEP/data" ] || { echo "returning.sh: $KEEP holds no database; grow one: KEEP=$KEEP Benchmarks/e2e/growth.sh" >&2; exit 2; }
source "$(dirname "$0")/lib.sh"
returning=${RETURNING:-100000}
slice=${SLICE:-100000}
slices=$(( $(psql_db "SELECT count(*) FROM accounts") / slice ))
(( slices > 0 )) || { echo "returning.sh: fewer than $slice accounts in $KEEP" >&2; exit 2; }
# The people of growth.sh's returning phase: one subject from every slice in turn.
mint_returning() {
    for s in $(seq 0 $(( slices - 1 ))); do
        mint "$work/returning.$s.txt" "g$s." $(( returning / slices )) "$slice" $(( s * 997 % slice ))
    done
    paste -d '\n' "$work"/returning.*.txt | grep -v '^$' >"$1"
    rm -f "$work"/returning.*.txt
}
mint_returning "$work/warm.txt"
echo "== first pass (unmeasured): $(signin_all "$work/warm.txt")"
for pass in $(seq "${PASSES:-2}"); do
    mint_returning "$work/pass.txt"
    psql_db "SELECT pg_stat_reset(), pg_stat_reset_shared('bgwriter'), pg_stat_reset_shared('wal')" >/dev/null
    cpu_start
    echo "== pass $pass, returning users at $(psql_db "SELECT count(*) FROM accounts") accounts: $(signin_all "$work/pass.txt")"
    cpu_report "$returning"
    echo "   pages read outside shared_buffers: $(psql_db "SELECT string_agg(relname || ' ' || blocks, ', ' ORDER BY blocks DESC) FROM (
        SELECT indexrelname AS relname, idx_blks_read AS blocks FROM pg_statio_user_indexes WHERE idx_blks_read > 100
        UNION ALL SELECT relname, heap_blks_read FROM pg_statio_user_tables WHERE heap_blks_read > 100) r")"
    echo "   WAL: $(psql_db "SELECT pg_size_pretty(wal_bytes) || ', ' || wal_fpi || ' full-page images' FROM pg_stat_wal"); dirty pages written by backends: $(psql_db "SELECT buffers_backend FROM pg_stat_bgwriter")"
done
echo "== broker RSS: peak $(peak_rss)"
rm -f "$work/warm.txt" "$work/pass.txt"

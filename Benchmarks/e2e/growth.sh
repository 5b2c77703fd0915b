#!/usr/bin/env bash
# Growth benchmark: new users from an empty, freshly migrated database to ACCOUNTS accounts
# (default 1,000,000), the sign-in rate of every SLICE (default 100,000) new accounts, then
# returning users at that size. Same setup as run.sh (wrk 1 thread, 16 connections, no manual
# step); the broker's RSS is sampled every second. Tokens are minted before the clock starts,
# a slice ahead of the load (minting shares the cores only between slices).
# Usage: [TARGET=embedded|tcp] [ACCOUNTS=N] [SLICE=N] Benchmarks/e2e/growth.sh
source "$(dirname "$0")/lib.sh"
accounts=${ACCOUNTS:-1000000}
slice=${SLICE:-100000}
slices=$(( accounts / slice ))

echo "target: $target; $slices slices of $slice new users" >&2
mint "$work/slice.0.txt" "g0." "$slice"
for s in $(seq 0 $(( slices - 1 ))); do
    # Each slice's tokens are all posted; wrk is stopped once every one made its account.
    started=$(psql_db "SELECT now()")
    result=$(signin_all "$work/slice.$s.txt")
    rm -f "$work/slice.$s.txt"
    # The slice's rate from the database as well: its sessions over the time between its first and last.
    db_rate=$(psql_db "SELECT round(count(*) / greatest(extract(epoch FROM max(created_at) - min(created_at)), 0.001)) FROM sessions WHERE created_at >= '$started'")
    echo "== slice $s: accounts $(( s * slice )) -> $(psql_db "SELECT count(*) FROM accounts")  $result db_rate=$db_rate"
    if (( s + 1 < slices )); then mint "$work/slice.$(( s + 1 )).txt" "g$(( s + 1 ))." "$slice"; fi
done
# Returning users spread over the whole tenant: one subject from every slice in turn, each
# with a fresh token; all of them posted (more than 20 s at 3,000/s), rate over the time taken.
returning=${RETURNING:-100000}
for s in $(seq 0 $(( slices - 1 ))); do
    mint "$work/returning.$s.txt" "g$s." $(( returning / slices )) "$slice" $(( s * 997 % slice ))
done
paste -d '\n' "$work"/returning.*.txt | grep -v '^$' >"$work/returning.txt"
before=$(psql_db "SELECT count(*) FROM accounts")
echo "== returning users at $before accounts ($returning sign-ins, $connections connections)"
cpu_start
signin_all "$work/returning.txt"
cpu_report "$returning"
echo "   (accounts made by this run: $(( $(psql_db "SELECT count(*) FROM accounts") - before )))"
echo "== broker RSS: peak $(peak_rss); samples max $(sort -n "$work/rss.txt" | tail -1) kB"
echo "== database size: $(psql_db "SELECT pg_size_pretty(pg_database_size(current_database()))")"

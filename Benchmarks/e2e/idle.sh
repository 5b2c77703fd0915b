#!/usr/bin/env bash
# What the idle share of the two cores is made of during sign-ins: `perf sched record` (Debian's
# linux-perf) of every context switch on the machine for WINDOW seconds in the middle of a
# PHASE run (returning by default, or new), then `perf sched timehist`, read by idle.awk:
# - how long each core sat idle at a stretch (the idle time by the length of its stretches),
# - whether the other core was busy meanwhile (one core idle: nothing else was runnable, the
#   work is a chain of hand-overs; both idle: everyone waits on something outside the CPUs),
# - what ended each idle stretch (the task woken onto the core: the broker's threads,
#   PostgreSQL's backends, wrk, other) and what ran just before it,
# - per kind of task: CPU time, switches a sign-in, and the average delay between being woken
#   and running (`sch delay`).
# On a PostgreSQL of its own over TCP with default settings, 16 connections (CONN). Run as root
# from the repository's root (`perf sched record -a` traces the whole machine).
# Usage: [BIN=DIR] [PHASE=returning|new] [CONN=16] [WINDOW=3] [SCHED_DATA=file, to keep the recording]
#        Benchmarks/e2e/idle.sh
export TARGET=tcp
here=$(cd "$(dirname "$0")" && pwd)
source "${LIB:-$here/lib.sh}"
phase=${PHASE:-returning} conn=${CONN:-16} window=${WINDOW:-3}
mint "$work/new.txt" new. 40000
if [[ $phase == returning ]]; then
    signin "$work/new.txt" 10s >/dev/null
    mint "$work/load.txt" new. 60000 10000 $((RANDOM))
else
    mint "$work/load.txt" new. 60000
fi
TOKENS="$work/load.txt" wrk -t1 -c"$conn" -d12s -s "$here/signin.lua" "$base" | grep RESULT >"$work/out.txt" &
wrk_pid=$!
sleep 4
perf sched record -a -o "${SCHED_DATA:-$work/sched.data}" -- sleep "$window" >/dev/null 2>&1
wait "$wrk_pid"
rate=$(sed -n 's/.* rps=\([0-9]*\).*/\1/p' "$work/out.txt" | head -1)
echo "== $phase sign-ins, $conn connections: $(cat "$work/out.txt")"
perf sched timehist -i "${SCHED_DATA:-$work/sched.data}" 2>/dev/null |
    awk -v broker="$broker_pid" -v rate="$rate" -v window="$window" -f "$here/idle.awk"

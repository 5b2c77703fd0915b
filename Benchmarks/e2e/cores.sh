#!/usr/bin/env bash
# Where the two cores' time goes during returning sign-ins: the broker (by thread), PostgreSQL
# and the machine's idle share (/proc/stat), on a PostgreSQL of its own over TCP with default
# settings. 10 s of new sign-ins unmeasured, then ROUNDS rounds of 8 s of returning sign-ins of
# 10,000 of those people at CONN connections (16 by default), each with fresh tokens.
# LIB: the lib.sh to source; an older build runs with its own checkout's (its flags may differ).
# Usage: [BIN=DIR] [CONN=16] [ROUNDS="1 2"] [LIB=path/lib.sh] Benchmarks/e2e/cores.sh
export TARGET=tcp
source "${LIB:-$(dirname "$0")/lib.sh}"
mint "$work/new.txt" new. 40000
signin "$work/new.txt" 10s >/dev/null
# busy (user, nice, system, irq, softirq) and idle (idle, iowait) ticks of the whole machine
machine() { awk '/^cpu /{print $2+$3+$4+$7+$8, $5+$6}' /proc/stat; }
# CPU ticks of the broker's threads, summed by thread name
threads() {
    for t in /proc/"$broker_pid"/task/*; do echo "$(cat "$t/comm") $(awk '{print $14+$15}' "$t/stat")"; done |
        awk '{a[$1]+=$NF} END {for (k in a) print k, a[k]}' | sort
}
for round in ${ROUNDS:-1 2}; do
    mint "$work/ret.txt" new. 60000 10000 $(( RANDOM ))
    threads >"$work/t0"; cpu_start; read -r b0 i0 < <(machine)
    TOKENS="$work/ret.txt" wrk -t1 -c"${CONN:-16}" -d8s --latency -s Benchmarks/e2e/signin.lua "$base" | grep RESULT >"$work/out.txt"
    read -r b1 i1 < <(machine); threads >"$work/t1"
    echo "== round $round, ${CONN:-16} connections: $(cat "$work/out.txt")"
    cpu_report "$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' "$work/out.txt" | head -1)"
    echo "   machine: $(( 100 * (i1 - i0) / (b1 - b0 + i1 - i0) )) % idle; broker threads (CPU ticks): $(join "$work/t0" "$work/t1" | awk '{d=$3-$2; if (d>0) printf "%s %d  ", $1, d}')"
done

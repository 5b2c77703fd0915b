#!/usr/bin/env bash
# The CPU a sign-in costs, new and returning, for builds run alone one after the other: a
# PostgreSQL of its own over TCP with default settings, 10 s of new Apple sign-ins, then 10 s of
# returning sign-ins of 10,000 of those people (80,000 tokens: the supply does not cap a run
# below 8,000/s), each with requests/s and the broker's and PostgreSQL's CPU a request. For the
# reference build a647c30 (its broker with today's mock-idp in one folder): WALL=off LINE=off.
# Usage: [BIN=DIR] [WALL=off] [LINE=off] Benchmarks/e2e/sign-in-cpu.sh
export TARGET=tcp
source "$(dirname "$0")/lib.sh"
mint "$work/new.txt" new. 40000
mint "$work/returning.txt" new. 80000 10000 7
echo "== new users (10s, $connections connections)"
cpu_start
signin "$work/new.txt" 10s
cpu_report "$(psql_db "SELECT count(*) FROM accounts")"
echo "== returning users (10s, $connections connections, 10000 people)"
cpu_start
signin "$work/returning.txt" 10s | tee "$work/returning.out"
cpu_report "$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' "$work/returning.out" | head -1)"

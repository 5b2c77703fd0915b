#!/usr/bin/env bash
# Two builds measured at the same moments: run.sh for each at once, each with its own database,
# MockIdP and wrk, started together (same script, so their phases line up within about a
# second). This machine's speed moves by a third from hour to hour; two builds run one after the
# other compare the hours as much as the builds. Run at once, both see the same machine, and the
# ratio of their figures is the builds' (each has half the machine: the figures themselves are
# about half of a run alone's and are not compared with those).
# Usage: [ENV_A="NAME=value ..."] [ENV_B=...] Benchmarks/e2e/at-once.sh DIR_A DIR_B [duration_seconds]
#   DIR_A, DIR_B: folders holding release builds of `broker` and `mock-idp` (as run.sh's BIN).
#   ENV_A, ENV_B: settings of run.sh for one side only; for the reference build a647c30 (its
#   broker with today's mock-idp): ENV_A="WALL=off LINE=off" (it predates the tenant wall and
#   `--type oidc`).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 2 ] || { echo "usage: $0 DIR_A DIR_B [duration_seconds]" >&2; exit 2; }
a=$1 b=$2 duration=${3:-10}
out=$(mktemp -d /tmp/at-once.XXXXXX)
export NEW_TOKENS=${NEW_TOKENS:-30000} RETURNING_SUBJECTS=${RETURNING_SUBJECTS:-10000}
# shellcheck disable=SC2086 # ENV_A and ENV_B are lists of NAME=value words
env ${ENV_A:-} BIN="$a" Benchmarks/e2e/run.sh "$duration" >"$out/a.log" 2>&1 &
pid_a=$!
# shellcheck disable=SC2086
env ${ENV_B:-} BIN="$b" Benchmarks/e2e/run.sh "$duration" >"$out/b.log" 2>&1 &
pid_b=$!
wait "$pid_a" "$pid_b"
rps() { sed -n 's/^RESULT .*rps=\([0-9]*\).*/\1/p' "$1"; }
paste <(printf '%s\n' "new users" "returning" "refresh" "after a restart") <(rps "$out/a.log") <(rps "$out/b.log") |
    awk -F'\t' 'BEGIN { printf "%-16s %8s %8s %7s\n", "phase", "A rps", "B rps", "B/A" }
        { printf "%-16s %8d %8d %7.2f\n", $1, $2, $3, ($2 > 0 ? $3 / $2 : 0) }'
echo "(logs: $out)"

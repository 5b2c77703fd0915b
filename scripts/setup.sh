#!/usr/bin/env bash
# Installs what a fresh machine lacks to build, run and test the broker: the PostgreSQL server
# and the C libraries the packages link (libssl, libpq, libcurl); with --tests, PgBouncer too.
# Safe to run again; does nothing when all is there.
set -euo pipefail

packages=(postgresql libssl-dev libpq-dev libcurl4-openssl-dev)
# --tests: what only the tests use besides: Debian's PgBouncer, which PoolerTests put in front of
# the test cluster (decision 0086).
if [[ "${1:-}" == --tests ]]; then packages+=(pgbouncer); fi
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "setup: missing packages: ${missing[*]}; run as root or: sudo apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
    echo "setup: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian's postgresql package starts a system cluster on port 5432; the broker never uses it.

command -v swift >/dev/null || { echo "setup: Swift 6 toolchain not found on PATH (expected /opt/swift/usr/bin)." >&2; exit 1; }

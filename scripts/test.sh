#!/usr/bin/env bash
# Sets up what is missing and runs every test against a real, throwaway PostgreSQL cluster
# that this script starts (and stops on exit). Also validates openapi.yaml, checks the
# decision records against their index and the code's formatting.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests

# The OpenAPI contract must validate with a stock validator.
python3 -c "import openapi_spec_validator" 2>/dev/null || python3 -m pip install -q openapi-spec-validator
python3 -m openapi_spec_validator openapi.yaml
# Every decision record has a status line and a row in docs/decisions/README.md.
scripts/check-decisions.sh
# Statements reach the pool one way (docs/architecture.md): through `rows`, `transaction` or
# `withScopedConnection` (the task's tenant scope, an open connection, the commit confirmed),
# never through PostgresNIO's own `PostgresClient.query`/`execute` from a repository.
if { grep -rnE '\bclient\.(query|execute)\(' Sources/Storage --include='*.swift'; grep -rn '\bclient\.query(' Sources --include='*.swift'; } |
    grep -v '^Sources/Storage/Pool/' | sort -u | grep .; then
    echo "test: the statements above go to PostgresNIO's client directly; send them through client.rows (Sources/Storage/Pool/PooledStatements.swift)" >&2
    exit 1
fi
# The code is laid out as swift-format lays it out (.swift-format; the toolchain's own
# swift-format). To fix: swift format format --in-place --recursive --parallel Sources Tests Plugins Package.swift
swift format lint --strict --recursive --parallel Sources Tests Plugins Package.swift || {
    echo "test: the code is not formatted; run: swift format format --in-place --recursive --parallel Sources Tests Plugins Package.swift" >&2
    exit 1
}
# Broker access tokens are checked with a stock JOSE library in the tests.
python3 -c "import joserfc" 2>/dev/null || python3 -m pip install -q joserfc
# A stock OAuth / OpenID Connect client signs in through a tenant's OpenID Provider (AuthlibClientTests).
python3 -c "import authlib, requests" 2>/dev/null || python3 -m pip install -q 'authlib==1.9.10' requests
# Webhook deliveries are verified with the stock Standard Webhooks library.
python3 -c "import standardwebhooks" 2>/dev/null || python3 -m pip install -q standardwebhooks
# Contract fuzzing (ContractFuzzTests): schemathesis in a virtual environment of its own under
# .build (it brings its own versions of libraries the validator above uses).
schemathesis_venv=.build/schemathesis
if ! "$schemathesis_venv/bin/schemathesis" --version >/dev/null 2>&1; then
    python3 -m venv "$schemathesis_venv"
    "$schemathesis_venv/bin/python" -m pip install -q 'schemathesis==4.32.5'
fi
export BROKER_SCHEMATHESIS="$PWD/$schemathesis_venv/bin/schemathesis"

bin_dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[[ -x "$bin_dir/initdb" ]] || { echo "test: PostgreSQL server binaries not found" >&2; exit 1; }

# PostgreSQL refuses to run as root: run the cluster as the 'postgres' user when we are root.
run_pg() { if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }

work=$(mktemp -d /tmp/identitybroker-test.XXXXXX)
chmod 711 "$work"
mkdir -p "$work/data" "$work/run"
[[ $(id -u) -eq 0 ]] && chown postgres:postgres "$work/data" "$work/run"
cleanup() {
    run_pg "$bin_dir/pg_ctl" -D "$work/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

run_pg "$bin_dir/initdb" -D "$work/data" -U postgres --auth=trust --no-locale -E UTF8 --no-instructions >/dev/null
# Each test runs on a database of its own with its own pool and LISTEN connection; before tests
# were bounded to 12 at once, 600 connections ran out when the suites of issue 23 came in.
run_pg "$bin_dir/pg_ctl" -D "$work/data" -l "$work/data/server.log" -w -s \
    -o "-k $work/run -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=1200" start
# The role broker serve runs as (no superuser: the tenant wall's row-level security applies to
# it), as 'broker db migrate' creates it on the embedded default; every migrated test database
# grants it its privileges. Tests run the application as this role (TestDatabase).
run_pg "$bin_dir/psql" -h "$work/run" -U postgres -d postgres -qX -c "CREATE ROLE broker_serve LOGIN" >/dev/null

# At most 12 tests run at once (Swift Testing's own setting). Unbounded, all 575 started together
# on two cores: a test's deadline was then met or missed by the scheduler, not by the code (two
# CI runs of issue 23 each lost one different test to it), and the phase took longer (275 s on
# CI against 217 s here with 12).
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-12}"
export BROKER_TEST_DATABASE_URL="postgres:///postgres?host=$work/run&user=postgres"
export BROKER_POSTGRES_BIN="$bin_dir"
# Debian's PgBouncer, put in front of the cluster by PoolerTests (decision 0086).
export BROKER_PGBOUNCER="${BROKER_PGBOUNCER:-/usr/sbin/pgbouncer}"

swift build --build-tests
export BROKER_BIN="$(swift build --show-bin-path)/broker"
# Runs one `swift test`, its output kept; when it fails, the failed tests and their issues are
# printed again at the end, so the tail of a long log (all CI keeps) names them.
run_tests() {
    local log="$work/tests.log" status=0
    swift test --skip-build "$@" 2>&1 | tee "$log" || status=$?
    if ((status != 0)); then
        echo "test: failed; the failed tests and their issues, again:" >&2
        grep -a -A4 "recorded an issue\|✘ Test [^r]" "$log" | grep -av "^.\{0,3\}\(◇\|✔\)" | head -80 >&2 || true
        exit "$status"
    fi
}
if (($#)); then
    run_tests "$@"
else
    # The phases by Swift Testing tag (Tests/TestSupport/TestPhases.swift says why each waits):
    # the untagged suites first, at most 12 tests at once; then .timing, whose bounds the load of
    # 400 other tests would break; .load and .outage, which make load of their own or stop
    # PostgreSQL; .fuzz alone, last. scripts/test-phases.py reads the tags from the bundle.
    phases=$(scripts/test-phases.py "$(swift build --show-bin-path)/IdentityBrokerPackageTests.xctest")
    phase() { awk -v name="$1" '$1 == name { print $2 }' <<<"$phases"; }
    run_tests --skip "$(phase tagged)"
    run_tests --filter "$(phase timing)"
    # The .load tests make load of their own: one at a time, or each is the other's load (three
    # broker processes beside 2,000 half-open connections once left a webhook delivery to its
    # 30 s retry and the test's 60 s wait).
    SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=1 run_tests --filter "$(phase load)"
    for name in outage fuzz; do
        run_tests --filter "$(phase "$name")"
    done
fi

#!/usr/bin/env bash
# Sets up what is missing, builds the broker and runs it in demo mode on its embedded default:
# a private PostgreSQL in ./.broker-demo (BROKER_DEMO_DATA_DIR), a demo tenant wired to an in-process MockIdP (Apple, Google, Facebook),
# and a printed curl command per provider that completes a sign-in.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
configuration="${BROKER_BUILD_CONFIGURATION:-debug}"
swift build -c "$configuration" --product broker
export BROKER_LOG_FORMAT="${BROKER_LOG_FORMAT:-text}"
# As root the embedded PostgreSQL runs as 'postgres', which must reach the data folder; a
# checkout under a private home folder (e.g. /root) is out of its reach.
if [[ -z "${BROKER_DEMO_DATA_DIR:-}" && $(id -u) -eq 0 ]] && ! runuser -u postgres -- test -x "$PWD"; then
    export BROKER_DEMO_DATA_DIR=/var/lib/identitybroker-demo
    echo "run: $PWD is private to root; the demo keeps its data in $BROKER_DEMO_DATA_DIR" >&2
fi
exec "$(swift build -c "$configuration" --show-bin-path)/broker" demo "$@"

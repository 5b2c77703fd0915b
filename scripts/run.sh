#!/usr/bin/env bash
# Sets up what is missing, builds the broker and runs it in demo mode on its embedded default:
# a private PostgreSQL in ./.broker, a demo tenant wired to an in-process MockIdP (as Apple),
# and a printed curl command that completes a sign-in.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
configuration="${BROKER_BUILD_CONFIGURATION:-debug}"
swift build -c "$configuration" --product broker
export BROKER_LOG_FORMAT="${BROKER_LOG_FORMAT:-text}"
exec "$(swift build -c "$configuration" --show-bin-path)/broker" demo "$@"

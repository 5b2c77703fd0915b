#!/usr/bin/env bash
# Sets up what is missing, builds the broker and runs it on its embedded default: a private
# PostgreSQL in ./.broker and a demo tenant with an API key (printed once, on first run).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
configuration="${BROKER_BUILD_CONFIGURATION:-debug}"
swift build -c "$configuration" --product broker
broker="$(swift build -c "$configuration" --show-bin-path)/broker"
export BROKER_LOG_FORMAT="${BROKER_LOG_FORMAT:-text}"

if ! "$broker" tenant show demo >/dev/null 2>&1; then
    "$broker" tenant create demo --name "Demo tenant" >/dev/null
    key=$("$broker" api-key create --tenant demo --name demo 2>/dev/null)
    cat <<MSG
Demo tenant 'demo' created. Its API key (shown once, keep it):

    $key

Try:  curl -s -H "Authorization: Bearer $key" http://127.0.0.1:${BROKER_PORT:-8080}/v1/tenant
MSG
fi
exec "$broker" serve

#!/usr/bin/env bash
# Provider benchmark: Apple, Google, Facebook and generic OpenID Connect sign-ins on one freshly
# migrated database, in the same run (same machine state), with MockIdP playing the four on
# loopback and wrk (1 thread, 16 connections). No manual step: no statistics step, no tuning.
# Phases, in order:
#   <provider> new        every request a new person of that provider
#   <provider> returning  people the new phase created sign in again, each with a fresh token
# for apple, google, facebook (Limited Login) and line (an OpenID Connect provider, as LINE
# would be configured: MockIdP's issuer /oidc/line, RS256 id tokens); then
#   facebook classic      returning people with classic access tokens: two Graph calls each
#                         (debug_token, /me) to MockIdP on loopback, over pooled connections
#   login options         GET /v1/login-options?platform=ios, as every app launch asks it
# Prints one RESULT line per phase and the broker's peak RSS.
# Usage: [TARGET=embedded|tcp] Benchmarks/e2e/providers.sh [duration_seconds]
duration=${1:-15}
source "$(dirname "$0")/lib.sh"
new_tokens=${NEW_TOKENS:-45000}
people=${RETURNING_SUBJECTS:-20000}

echo "target: $target; minting tokens..." >&2
# The provider id each provider's tokens are minted as (line is of type oidc).
mint_provider() { case "$1" in line) echo oidc ;; *) echo "$1" ;; esac; }
for provider in apple google facebook line; do
    MINT_PROVIDER=$(mint_provider "$provider") mint "$work/$provider.new.txt" "$provider." "$new_tokens"
    MINT_PROVIDER=$(mint_provider "$provider") mint "$work/$provider.returning.txt" "$provider." 60000 "$people"
done
"$bin/mock-idp" facebook-token --url "$idp" --app-id "$facebook_app" --user-prefix facebook. \
    --count 40000 --users "$people" >"$work/facebook_classic.txt"

for provider in apple google facebook line; do
    echo "== $provider new users (${duration}s, $connections connections)"
    PROVIDER=$provider signin "$work/$provider.new.txt" "${duration}s"
    sleep 1
    echo "== $provider returning users (${duration}s, $connections connections, $people people)"
    cpu_start
    result=$(PROVIDER=$provider signin "$work/$provider.returning.txt" "${duration}s")
    echo "$result"
    cpu_report "$(echo "$result" | sed -n 's/.*requests=\([0-9]*\).*/\1/p')"
done
echo "== facebook classic returning users (${duration}s, $connections connections, $people people; Graph on loopback)"
PROVIDER=facebook_classic signin "$work/facebook_classic.txt" "${duration}s"
echo "== login options, ios (${duration}s, $connections connections)"
wrk -t"$threads" -c"$connections" -d"${duration}s" --latency -s Benchmarks/e2e/login-options.lua "$base" | grep RESULT
echo "   (accounts: $(psql_db "SELECT provider || ' ' || count(*) FROM identities GROUP BY provider ORDER BY provider" | tr '\n' ' '))"
echo "== broker peak RSS: $(peak_rss)"

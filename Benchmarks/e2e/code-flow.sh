#!/usr/bin/env bash
# The OpenID Provider's authorization code flow, browserless, end to end (issue 42 §6): a
# confidential relying party (client_secret_post, PKCE S256) signs people in through the tenant's
# /t/bench/authorize with `provider=` (straight to the upstream provider, no page), on a
# PostgreSQL of its own over TCP with default settings, MockIdP playing Apple and the issuer
# line, wrk with 1 thread and 16 connections. For each provider, a round of new people and a
# round of the same people again (returning), each in order:
#   authorize  GET /t/bench/authorize?...&provider=<p>: the client, redirect URI and request
#              checked, the request sealed into a new state (nothing written; decision 0099),
#              303 to the provider
#   upstream   MockIdP's authorize (Apple's page with its form_post form; line's redirect):
#              not the broker, not counted
#   callback   POST /apple/callback or GET /oidc/callback: the state opened and claimed (its row
#              written), the provider's code
#              exchanged and its id token verified, the person signed in (account, identity,
#              the client's session; decision 0085), the code kept naming the session, 303 to
#              the relying party's redirect URI
#   token      POST /t/bench/token: the client authenticated, the code redeemed (one statement)
#              and checked (PKCE), the access and ID tokens signed, the refresh token derived
# Each phase sends every request once and is timed from its first to its last answer; "whole
# flow" is the people signed in over the three broker phases' time together.
# STATEMENTS=1: pg_stat_statements loaded, and what PostgreSQL ran in each broker phase printed,
# with the shared buffers each call read (a statement whose plan reads more than its keys shows
# there first; not in measured runs: tracking costs PostgreSQL time).
# PROFILE=FILE: `perf record -a` samples the whole machine (broker, PostgreSQL, MockIdP, wrk)
# during each callback phase into FILE.<provider>.<who> (not in measured runs: sampling costs CPU);
# `perf report -i FILE.apple.new --sort comm` splits it by process.
# Usage: [BIN=DIR] [FLOWS=N] [STATEMENTS=1] [PROFILE=FILE] Benchmarks/e2e/code-flow.sh
export TARGET=tcp
# MockIdP's people: the first round of each provider signs FLOWS new people in, the second the
# same people again.
export WEB_PEOPLE=${FLOWS:-12000}
if [ -n "${STATEMENTS:-}" ]; then
    export PG_EXTRA_OPTS="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"
fi
source "$(dirname "$0")/lib.sh"
statements() {
    [ -n "${STATEMENTS:-}" ] || return 0
    psql -h 127.0.0.1 -p "$pg_port" -U postgres -c "SELECT calls, round(total_exec_time::numeric, 0) AS total_ms,
        round(mean_exec_time::numeric, 3) AS mean_ms, (shared_blks_hit + shared_blks_read) / greatest(calls, 1) AS buffers_a_call,
        left(regexp_replace(query, '\s+', ' ', 'g'), 120) AS statement
        FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 12" postgres
}
reset_statements() {
    [ -n "${STATEMENTS:-}" ] || return 0
    psql -h 127.0.0.1 -p "$pg_port" -U postgres -qAtc "CREATE EXTENSION IF NOT EXISTS pg_stat_statements; SELECT pg_stat_statements_reset()" postgres >/dev/null
}
count=${FLOWS:-12000}
redirect=https://app.bench.example/callback
# Today the tenant's web options need a return URL to be offered (the REST web flow's), though
# the code flow sends the person to the client's redirect URI instead: one is given, unused.
verifier=bench-code-verifier-0123456789-abcdefghijklmnopqrstuvwxyz
challenge=Pav_2bL23Q_zW68HAy3C3F5IYGguFkNZtqFj79uZWmU # BASE64URL(SHA-256(verifier)), RFC 7636

"$bin/broker" apple client add --tenant bench --group com.bench.app --client-id com.bench.web --kind service \
    --redirect-uri "$base/apple/callback" --return-url https://app.bench.example/done >/dev/null
printf '%s\n' "$oidc_web_secret" >"$work/line-secret.txt"
"$bin/broker" provider enable line --tenant bench --type oidc --issuer "$oidc_issuer" --client-id bench-line \
    --client-secret-file "$work/line-secret.txt" --return-url https://app.bench.example/done --platforms ios,android,web >/dev/null
read -r client secret < <("$bin/broker" client create --tenant bench --name bench-web --redirect-uri "$redirect" --json |
    python3 -c 'import json,sys; c = json.load(sys.stdin); print(c["client_id"], c["client_secret"])')
encoded_redirect=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$redirect")
token_form="grant_type=authorization_code&client_id=$client&client_secret=$secret&redirect_uri=$encoded_redirect&code_verifier=$verifier"

seconds() { sed -n 's/.*duration_s=\([0-9.]*\).*/\1/p' "$1"; }
# flow PROVIDER WHO: every one of the people through the three broker phases; WHO says whether
# MockIdP's people are new (the first round) or the same again (the second).
flow() {
    local provider=$1 who=$2
    echo "== $provider through /t/bench/authorize: $count sign-ins, every person $who"
    seq "$count" | awk -v p="$provider" -v c="$client" -v r="$encoded_redirect" -v ch="$challenge" -v w="$who" \
        '{ printf "GET /t/bench/authorize?response_type=code&client_id=%s&redirect_uri=%s&scope=openid%%20email%%20profile%%20offline_access&state=%s%d&nonce=n%d&code_challenge=%s&code_challenge_method=S256&provider=%s\n", c, r, w, $1, $1, ch, p }' \
        >"$work/authorize.txt"
    reset_statements
    cpu_start
    phase authorize "$base" "$work/authorize.txt" "$work/upstream.txt" EXTRACT=location | tee "$work/authorize.out"
    cpu_report "$count"
    statements
    local form=() extract=location
    # Apple posts its answer to the callback (form_post); line redirects to it.
    if [ "$provider" = apple ]; then form=(CONTENT_TYPE=application/x-www-form-urlencoded) extract=apple_form; fi
    phase upstream "$idp" "$work/upstream.txt" "$work/callback.txt" EXTRACT=$extract >/dev/null
    reset_statements
    local perf_pid=
    if [ -n "${PROFILE:-}" ]; then
        perf record -a -e cpu-clock -F 499 -g -o "$PROFILE.$provider.$who" >/dev/null 2>&1 &
        perf_pid=$!
    fi
    cpu_start
    phase callback "$base" "$work/callback.txt" "$work/token.txt" "${form[@]}" \
        EXTRACT=oauth_code EXCHANGE_PATH=/t/bench/token TOKEN_FORM="$token_form" | tee "$work/callback.out"
    if [ -n "$perf_pid" ]; then kill -INT "$perf_pid"; wait "$perf_pid" || true; fi
    cpu_report "$(wc -l <"$work/token.txt")"
    statements
    reset_statements
    cpu_start
    phase token "$base" "$work/token.txt" "$work/sessions.txt" API_KEY= CONTENT_TYPE=application/x-www-form-urlencoded EXTRACT=none |
        tee "$work/token.out"
    cpu_report "$(wc -l <"$work/token.txt")"
    statements
    local signed_in total
    signed_in=$(sed -n 's/.*requests=\([0-9]*\).*non2xx=\([0-9]*\).*/\1 \2/p' "$work/token.out" | awk '{ print $1 - $2 }')
    total=$(echo "$(seconds "$work/authorize.out") + $(seconds "$work/callback.out") + $(seconds "$work/token.out")" | bc -l)
    printf '   whole flow: %d signed in over %.1f s of broker phases = %.0f/s\n' "$signed_in" "$total" "$(echo "$signed_in / $total" | bc -l)"
}
for provider in apple line; do
    flow "$provider" new
    flow "$provider" returning
done
echo "   (sessions of the relying party: $(psql_db "SELECT count(*) FROM sessions WHERE oauth_client_id IS NOT NULL"))"
# Updates that stayed on their page without touching an index (HOT) of the tables each flow
# updates: the states (claimed, then taken) and the codes (redeemed).
echo "   (updates, of them HOT: $(psql_db "SELECT string_agg(relname || ' ' || n_tup_upd || ', ' || n_tup_hot_upd, '; ' ORDER BY relname)
    FROM pg_stat_user_tables WHERE relname IN ('web_sign_in_states', 'web_sign_in_codes', 'identities', 'accounts')"))"
echo "== broker peak RSS: $(peak_rss)"

#!/usr/bin/env bash
# The tenant's OpenID Provider beside the REST API (issue 42 §6), on a PostgreSQL of its own
# over TCP with default settings: returning Apple sign-ins through POST /v1/sign-in/apple and
# through token exchange at /t/bench/token (RFC 8693, a public client), alternating (the native
# sign-in first in odd rounds, the exchange first in even ones), each with fresh tokens of the
# same 10,000 people; then the hosted sign-in page (GET /t/bench/authorize
# without a provider, with Apple and line on it): its rate, its size and the broker's CPU per page.
# PROFILE=FILE: `perf record` samples the broker during each sign-in round into
# FILE.<how>.<round> (not in measured runs: sampling costs CPU).
# Usage: [BIN=DIR] [CONN=16] [ROUNDS="1 2"] [PROFILE=FILE] Benchmarks/e2e/openid-provider.sh
export TARGET=tcp
source "${LIB:-$(dirname "$0")/lib.sh}"
client=$("$bin/broker" client create --tenant bench --name bench-app --public --redirect-uri com.bench.app:/cb --json 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["client_id"])')
mint "$work/new.txt" new. 40000 10000
signin "$work/new.txt" 10s >/dev/null
for round in ${ROUNDS:-1 2}; do
    # Which goes first alternates from round to round: the machine's speed drifts within a run,
    # and the second of a pair would otherwise always draw the slower minutes.
    order="apple token_exchange"
    if [ $(( round % 2 )) -eq 0 ]; then order="token_exchange apple"; fi
    for how in $order; do
        mint "$work/ret.txt" new. 60000 10000 $(( RANDOM ))
        cpu_start
        perf_pid=
        if [ -n "${PROFILE:-}" ]; then
            perf record -e cpu-clock -F 499 -g -p "$broker_pid" -o "$PROFILE.$how.$round" >/dev/null 2>&1 &
            perf_pid=$!
        fi
        PROVIDER=$how TENANT=bench OAUTH_CLIENT_ID=$client TOKENS="$work/ret.txt" \
            wrk -t1 -c"${CONN:-16}" -d8s --latency -s Benchmarks/e2e/signin.lua "$base" | grep RESULT >"$work/out.txt"
        echo "== round $round, $how: $(cat "$work/out.txt")"
        cpu_report "$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' "$work/out.txt" | head -1)"
        if [ -n "$perf_pid" ]; then kill -INT "$perf_pid"; wait "$perf_pid" || true; fi
    done
done
# The page with the tenant's web options on it: Apple through a Services ID and line.
"$bin/broker" apple client add --tenant bench --group com.bench.app --client-id com.bench.web --kind service \
    --redirect-uri "$base/apple/callback" --return-url https://app.bench.example/done >/dev/null
printf '%s\n' "$oidc_web_secret" >"$work/line-secret.txt"
"$bin/broker" provider enable line --tenant bench --type oidc --issuer "$oidc_issuer" --client-id bench-line \
    --client-secret-file "$work/line-secret.txt" --return-url https://app.bench.example/done --platforms ios,android,web >/dev/null
page="/t/bench/authorize?response_type=code&client_id=$client&redirect_uri=com.bench.app%3A%2Fcb&scope=openid&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256&state=s"
echo "== the sign-in page: $(curl -s -o /dev/null -w '%{http_code} %{size_download} bytes' "$base$page")"
cpu_start
wrk -t1 -c"${CONN:-16}" -d8s --latency -s Benchmarks/e2e/sign-in-page.lua "$base$page" | grep RESULT >"$work/out.txt"
echo "== the sign-in page: $(cat "$work/out.txt")"
cpu_report "$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' "$work/out.txt" | head -1)"

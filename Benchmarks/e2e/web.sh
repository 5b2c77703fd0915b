#!/usr/bin/env bash
# Web sign-in benchmark (issue 22): Apple's form_post flow with a Services ID and the OpenID
# Connect code flow with PKCE (line), end to end on one freshly migrated database, MockIdP
# playing Apple and the issuer on loopback, wrk with 1 thread and 16 connections. No manual step.
# For each provider, in order:
#   start      POST /v1/sign-in/<p>/web/start                       (each a new state)
#   authorize  MockIdP's authorize page, as the browser gets it      (not the broker: not measured)
#   callback   POST /apple/callback or GET /oidc/callback: the state taken, the id token
#              verified, the code exchanged at MockIdP's token endpoint (Apple: a client secret,
#              the exchanged id token verified too; line: PKCE and the client secret), the
#              verified sign-in sealed under a broker code, 303 to the return URL
#   exchange   POST /v1/sign-in/<p>/web/exchange: the broker code for a session (every person new)
# Each phase sends every request once and is timed from its first to its last answer.
# Usage: [TARGET=embedded|tcp] [WEB_SIGN_INS=N] [PROFILE=FILE] Benchmarks/e2e/web.sh
# PROFILE=FILE: `perf record` samples the broker during each callback phase into FILE.<provider>
# (not in measured runs: sampling costs CPU); with PROFILE_ALL=1, every process on the machine
# (broker, PostgreSQL, MockIdP, wrk), to see how the two cores are shared.
source "$(dirname "$0")/lib.sh"
count=${WEB_SIGN_INS:-12000}
return_url=https://bench.example.com/done

"$bin/broker" apple client add --tenant bench --group com.bench.app --client-id com.bench.web --kind service \
    --redirect-uri "$base/apple/callback" --return-url "$return_url" >/dev/null
printf '%s\n' "$oidc_web_secret" >"$work/line-secret.txt"
"$bin/broker" provider enable line --tenant bench --type oidc --issuer "$oidc_issuer" --client-id bench-line \
    --client-secret-file "$work/line-secret.txt" --return-url "$return_url" --platforms ios,android,web >/dev/null

for provider in apple line; do
    echo "== $provider on the web: $count sign-ins, every person new"
    seq "$count" | awk -v p="$provider" -v r="$return_url" '{ printf "POST /v1/sign-in/%s/web/start {\"return_url\":\"%s\",\"state\":\"b%d\"}\n", p, r, $1 }' >"$work/start.txt"
    phase start "$base" "$work/start.txt" "$work/authorize.txt" API_KEY="$API_KEY" EXTRACT=authorize_url
    if [ -n "${PROFILE:-}" ]; then
        profiling() { perf record -e cpu-clock -F 499 -g $( [ -n "${PROFILE_ALL:-}" ] && echo -a || echo -p $broker_pid ) -o "$PROFILE.$provider" >/dev/null 2>&1 & perf_pid=$!; }
    else
        profiling() { perf_pid=; }
    fi
    if [ "$provider" = apple ]; then
        phase authorize "$idp" "$work/authorize.txt" "$work/callback.txt" EXTRACT=apple_form
        cpu_start; profiling
        phase callback "$base" "$work/callback.txt" "$work/exchange.txt" CONTENT_TYPE=application/x-www-form-urlencoded \
            EXTRACT=code EXCHANGE_PATH=/v1/sign-in/apple/web/exchange
    else
        phase authorize "$idp" "$work/authorize.txt" "$work/callback.txt" EXTRACT=location
        cpu_start; profiling
        phase callback "$base" "$work/callback.txt" "$work/exchange.txt" EXTRACT=code EXCHANGE_PATH=/v1/sign-in/line/web/exchange
    fi
    cpu_report "$(wc -l <"$work/exchange.txt")"
    if [ -n "$perf_pid" ]; then kill -INT "$perf_pid"; wait "$perf_pid" || true; fi
    phase exchange "$base" "$work/exchange.txt" "$work/sessions.txt" API_KEY="$API_KEY" EXTRACT=none
done
echo "   (accounts: $(psql_db "SELECT provider || ' ' || count(*) FROM identities GROUP BY provider ORDER BY provider" | tr '\n' ' '))"
echo "== broker peak RSS: $(peak_rss)"

# Shared by the end-to-end benchmarks (sourced by run.sh and growth.sh): release binaries, a
# freshly migrated database as a deployment has it (the embedded default, or PostgreSQL over TCP
# with its default settings), MockIdP as Apple, Google, Facebook and a generic OpenID Connect
# issuer (line), one tenant made with the CLI, the broker, and wrk. No step here is one the
# product does not do by itself: no statistics step, no tuning.
# TARGET=embedded (default) | tcp. PG_EXTRA_OPTS (tcp): more `-c name=value` settings for that
# PostgreSQL (diag.sh loads pg_stat_statements and auto_explain with it; never in measured runs).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
scripts/setup.sh
if ! command -v wrk >/dev/null; then
    [[ $(id -u) -eq 0 ]] || { echo "bench: wrk is missing: sudo apt-get install -y wrk" >&2; exit 1; }
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
fi
target=${TARGET:-embedded}
connections=16
threads=1
scratch=.build-release
# BIN=DIR: the release binaries (broker, mock-idp) already built in DIR, e.g. copies of another
# commit's build, to compare builds run against run on one checkout; nothing is built then.
if [ -n "${BIN:-}" ]; then
    bin=$BIN
else
    swift build -c release --scratch-path "$scratch" --product broker >/dev/null
    swift build -c release --scratch-path "$scratch" --product mock-idp >/dev/null
    bin=$(swift build -c release --scratch-path "$scratch" --show-bin-path)
fi
# KEEP=DIR (embedded only): the broker's data folder, the MockIdP keys and the tenant live in DIR
# and outlive the run, so a later run (returning.sh) measures the database an earlier one grew.
if [ -n "${KEEP:-}" ]; then
    [ "$target" = embedded ] || { echo "KEEP works with TARGET=embedded only" >&2; exit 2; }
    work=$KEEP fresh=1
    [ -d "$work/data" ] && fresh=0
    mkdir -p "$work"
else
    work=$(mktemp -d /tmp/identitybroker-bench.XXXXXX) fresh=1
fi
chmod 711 "$work"
export BROKER_LOG_LEVEL=${BROKER_LOG_LEVEL:-warning} BROKER_LOG_FORMAT=text
# wrk sends thousands of requests a second from one address with one API key: the abuse limits
# (200/s per key, 50/s per address on the public routes, decision 0048) are raised, as an
# operator raises them for a trusted caller. Every request still takes a token from its bucket:
# the limits' cost is in every figure, only their refusals are out of reach.
export BROKER_API_KEY_RATE_LIMIT=${BROKER_API_KEY_RATE_LIMIT:-1000000} BROKER_PUBLIC_RATE_LIMIT=${BROKER_PUBLIC_RATE_LIMIT:-1000000}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
idp_port=$(free_port)
broker_port=$(free_port)
idp=http://127.0.0.1:$idp_port
export BROKER_APPLE_BASE_URL=$idp BROKER_PORT=$broker_port
export BROKER_GOOGLE_JWKS_URL=$idp/google/oauth2/v3/certs BROKER_FACEBOOK_JWKS_URL=$idp/facebook/.well-known/oauth/openid/jwks/
export BROKER_FACEBOOK_GRAPH_URL=$idp/facebook/graph
facebook_app=1000000000001 facebook_secret=bench-facebook-app-secret
base=http://127.0.0.1:$broker_port
if [ -n "${POOL:-}" ]; then export BROKER_DB_POOL_SIZE=$POOL; fi
pids=()
pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
run_pg() { if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ "$target" = tcp ]; then
        for dir in "$work/pg" "$work/standby"; do
            [ -f "$dir/postmaster.pid" ] && { run_pg "$pg_bin/pg_ctl" -D "$dir" -m fast -w stop >/dev/null 2>&1 || true; }
        done
    fi
    if [ -z "${KEEP:-}" ]; then rm -rf "$work"; fi
}
trap cleanup EXIT

case "$target" in
embedded)
    # The broker starts its own PostgreSQL in the data folder (initdb defaults; it migrates on start).
    export BROKER_DATA_DIR="$work/data"
    psql_db() { psql -h "$work/data/run" -U postgres -Atqc "$1" postgres; }
    ;;
tcp)
    # A PostgreSQL of its own with initdb's defaults (durable commits), reached over TCP.
    pg_port=$(free_port)
    mkdir -p "$work/pg"
    [[ $(id -u) -eq 0 ]] && chown postgres:postgres "$work/pg"
    run_pg "$pg_bin/initdb" -D "$work/pg" -U postgres --auth=trust -E UTF8 >/dev/null
    run_pg "$pg_bin/pg_ctl" -D "$work/pg" -l "$work/pg/server.log" -w -s \
        -o "-c listen_addresses=127.0.0.1 -p $pg_port -k $work/pg ${PG_EXTRA_OPTS:-}" start
    # STANDBY=1: a synchronous standby and HAProxy in front (failover.sh); $pg_port is HAProxy's.
    if [ -n "${STANDBY:-}" ]; then source Benchmarks/e2e/standby.sh; fi
    export DATABASE_URL="postgres://postgres@127.0.0.1:$pg_port/postgres?sslmode=disable"
    # The role broker serve connects as (operator guide, "The tenant wall"), made before the
    # migration that grants it its privileges.
    psql -h 127.0.0.1 -p "$pg_port" -U postgres -qXc "CREATE ROLE broker_serve LOGIN" postgres
    BROKER_MASTER_KEY=$(openssl rand -base64 32)
    export BROKER_MASTER_KEY
    "$bin/broker" db migrate >/dev/null
    psql_db() { psql -h 127.0.0.1 -p "$pg_port" -U postgres -Atqc "$1" postgres; }
    ;;
*) echo "TARGET must be embedded or tcp" >&2; exit 2 ;;
esac

# --oidc line: a generic OpenID Connect issuer (as LINE would be configured) whose RS256 key is
# the key file's, so `mint` (MINT_PROVIDER=oidc) signs tokens its key set verifies.
oidc_issuer=$idp/oidc/line oidc_web_secret=bench-line-web-secret
# Who consents on MockIdP's web authorize pages: a new person each time, or with WEB_PEOPLE=N
# the next of N people in turn (the first N new, then the same N again).
web_people=--web-new-person
if [ -n "${WEB_PEOPLE:-}" ]; then web_people="--web-people $WEB_PEOPLE"; fi
# shellcheck disable=SC2086 # $web_people is one flag or a flag and its value
"$bin/mock-idp" serve --port "$idp_port" --key-file "$work/idp-key.pem" \
    --facebook-app-id "$facebook_app" --facebook-app-secret "$facebook_secret" --oidc line \
    --oidc-web-client "bench-line:$oidc_web_secret" $web_people >"$work/idp.log" 2>&1 &
pids+=($!)
# MockIdP is up (its key files written) before anything mints or enables line (which reads discovery).
for _ in $(seq 300); do curl -sf "$oidc_issuer/.well-known/openid-configuration" >/dev/null && break; sleep 0.1; done
curl -sf "$oidc_issuer/.well-known/openid-configuration" >/dev/null || { echo "mock-idp did not start:" >&2; tail -20 "$work/idp.log" >&2; exit 1; }
# The tenant, made with the CLI (once, when KEEP names a folder that has it already).
if [ "$fresh" = 1 ]; then
    openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | openssl pkcs8 -topk8 -nocrypt >"$work/AuthKey.p8"
    "$bin/broker" tenant create bench >/dev/null
    "$bin/broker" apple team set --tenant bench --team-id BENCH00001 --key-id BENCHKEY01 --private-key-file "$work/AuthKey.p8" >/dev/null
    "$bin/broker" apple group add --tenant bench --primary-app-id com.bench.app >/dev/null
    printf '%s\n' "$facebook_secret" >"$work/facebook-secret.txt"
    "$bin/broker" provider enable google --tenant bench --client-id bench-web.apps.googleusercontent.com \
        --platforms ios,android,web >/dev/null
    "$bin/broker" provider enable facebook --tenant bench --app-id "$facebook_app" --app-secret-file "$work/facebook-secret.txt" \
        --limited-login --platforms ios,android,web >/dev/null
    # LINE=off: no generic OpenID Connect provider, for a build older than `--type oidc`
    # (a647c30, run through this script beside today's build by at-once.sh).
    if [ "${LINE:-on}" != off ]; then
        "$bin/broker" provider enable line --tenant bench --type oidc --issuer "$oidc_issuer" --client-id bench-line \
            --platforms ios,android,web >/dev/null
    fi
fi
key=$("$bin/broker" api-key create --tenant bench 2>/dev/null)

# The broker serves as broker_serve, to which the tenant wall applies (decision 0055), as an
# installation set up by the operator guide does (the embedded default does it by itself).
# WALL=off (TARGET=tcp) serves as the superuser instead, which bypasses the wall: the control
# for what the wall costs.
if [ "$target" = tcp ]; then
    if [ "${WALL:-on}" = off ]; then
        echo "   (serving as the superuser: the tenant wall does not apply)" >&2
    else
        export DATABASE_URL="postgres://broker_serve@127.0.0.1:$pg_port/postgres?sslmode=disable"
    fi
fi
# POOLER=transaction|session (TARGET=tcp): the broker serves through Debian's PgBouncer in that
# mode, as docs/scaling.md ("Connections and PgBouncer") sets it up, with as many server
# connections as the broker's pool (BROKER_DB_POOL_SIZE, default 3 per core), and in session
# mode one more for the LISTEN connection, which holds one there. In transaction
# mode: the scope per transaction, unnamed statements, the session work on PostgreSQL directly
# (decision 0086). In session mode: the startup settings ignored by PgBouncer and put on the role.
if [ -n "${POOLER:-}" ]; then
    [ "$target" = tcp ] || { echo "POOLER works with TARGET=tcp only" >&2; exit 2; }
    command -v pgbouncer >/dev/null || export PATH=$PATH:/usr/sbin
    command -v pgbouncer >/dev/null || scripts/setup.sh --tests
    bouncer_port=$(free_port)
    mkdir -p "$work/pgbouncer"
    printf '"postgres" ""\n"broker_serve" ""\n' >"$work/pgbouncer/users.txt"
    cat >"$work/pgbouncer/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=$pg_port
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bouncer_port
unix_socket_dir =
auth_type = trust
auth_file = $work/pgbouncer/users.txt
pool_mode = $POOLER
default_pool_size = $(( ${POOL:-$(( 3 * $(nproc) ))} + $([ "$POOLER" = session ] && echo 1 || echo 0) ))
max_client_conn = 1000
logfile = $work/pgbouncer/pgbouncer.log
pidfile = $work/pgbouncer/pgbouncer.pid
$([ "$POOLER" = session ] && echo "ignore_startup_parameters = statement_timeout,jit,plan_cache_mode")
INI
    [[ $(id -u) -eq 0 ]] && chown -R postgres "$work/pgbouncer"
    run_pg pgbouncer "$work/pgbouncer/pgbouncer.ini" >"$work/pgbouncer/out.txt" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do psql -h 127.0.0.1 -p "$bouncer_port" -U postgres -qAtc "SELECT 1" postgres >/dev/null 2>&1 && break; sleep 0.1; done
    # PgBouncer's own pid (as root, $! is runuser's, which leaves it running when killed).
    pids+=("$(cat "$work/pgbouncer/pgbouncer.pid")")
    direct_url=$DATABASE_URL
    export DATABASE_URL="postgres://broker_serve@127.0.0.1:$bouncer_port/postgres?sslmode=disable"
    if [ "$POOLER" = transaction ]; then
        export BROKER_DB_TENANT_SCOPE=transaction BROKER_DB_PREPARED_STATEMENTS=unnamed BROKER_DB_SESSION_URL=$direct_url
    else
        psql_db "ALTER ROLE broker_serve SET statement_timeout = '5s'; ALTER ROLE broker_serve SET jit = off;
            ALTER ROLE broker_serve SET plan_cache_mode = force_generic_plan" >/dev/null
    fi
    echo "   (serving through PgBouncer $(pgbouncer --version | head -1 | awk '{print $2}') in $POOLER mode on 127.0.0.1:$bouncer_port)" >&2
fi
# TRACES=1: the broker exports every trace (OTLP/HTTP, protobuf) to a receiver on loopback that
# counts the exports and keeps nothing (otlp-sink.py): what traces cost the broker.
if [ -n "${TRACES:-}" ]; then
    sink_port=$(free_port)
    python3 Benchmarks/e2e/otlp-sink.py "$sink_port" "$work/exports" &
    pids+=($!)
    export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$sink_port
    echo "   (traces exported to 127.0.0.1:$sink_port)" >&2
fi
start_broker() {
    "$bin/broker" serve >>"$work/broker.log" 2>&1 &
    broker_pid=$!
    pids+=($broker_pid)
    for _ in $(seq 300); do curl -sf "$base/readyz" >/dev/null && break; sleep 0.1; done
    curl -sf "$base/readyz" >/dev/null || { echo "broker did not become ready:" >&2; tail -20 "$work/broker.log" >&2; exit 1; }
}
start_broker
# restart_broker: a new broker process on the same database, as after a deploy; what the old
# one remembered (its quiet-path hint, its caches) is gone.
restart_broker() {
    kill "$broker_pid"
    wait "$broker_pid" 2>/dev/null || true
    start_broker
}

# The broker's resident memory, sampled every second for the whole run (peak printed at the end).
( while kill -0 "$broker_pid" 2>/dev/null; do grep VmRSS "/proc/$broker_pid/status" 2>/dev/null | awk '{print $2}'; sleep 1; done ) >"$work/rss.txt" &
pids+=($!)
peak_rss() { echo "$(grep VmHWM "/proc/$broker_pid/status" | awk '{print $2}') kB"; }

export API_KEY=$key CLIENT_ID=com.bench.app THREADS=$threads

# mint FILE PREFIX COUNT [SUBJECTS [FIRST]]: identity tokens, each with its own nonce (the
# client requires one), for subjects PREFIX(FIRST + i mod SUBJECTS). MINT_PROVIDER=google,
# facebook or oidc mints Google id tokens, Limited Login tokens or id tokens of the OpenID
# Connect issuer line instead of Apple's.
mint() {
    local audience=com.bench.app issuer=()
    case "${MINT_PROVIDER:-apple}" in
    google) audience=bench-web.apps.googleusercontent.com ;;
    facebook) audience=$facebook_app ;;
    oidc) audience=bench-line issuer=(--issuer "$oidc_issuer") ;;
    esac
    "$bin/mock-idp" mint --provider "${MINT_PROVIDER:-apple}" --key-file "$work/idp-key.pem" --audience "$audience" "${issuer[@]}" \
        --with-nonce --subject-prefix "$2" --count "$3" --subjects "${4:-$3}" --first "${5:-0}" >"$1"
}

# signin TOKENS DURATION: every token posted once (stops when they run out); prints RESULT.
signin() {
    TOKENS="$1" wrk -t"$threads" -c"$connections" -d"$2" --latency -s Benchmarks/e2e/signin.lua "$base" | grep RESULT
}

# until_done WRK_PID DONE: waits until every wrk thread has said it ran out of requests (a
# file DONE.<thread id>), gives its last requests 0.2 s to be answered, and interrupts wrk
# (SIGINT: it prints its summary for the time so far).
until_done() {
    local wrk_pid=$1 done=$2
    while kill -0 "$wrk_pid" 2>/dev/null; do
        if (( $(ls "$done".* 2>/dev/null | wc -l) >= threads )); then sleep 0.2; kill -INT "$wrk_pid"; break; fi
        sleep 0.1
    done
    wait "$wrk_pid" || true
}

# signin_all TOKENS: posts every token once and prints RESULT once all are answered. wrk's
# threads stop when their tokens run out, but wrk itself waits out its duration and divides by
# it; so it runs with a long duration and is interrupted (SIGINT: it prints its summary for the
# time so far) as soon as every thread has said it ran out (signin.lua's DONE_FILE) and its
# last requests had 0.2 s to be answered. The interval counted is at most ~0.3 s too long.
signin_all() {
    local out="$work/wrk.out" done="$work/.wrk-done"
    rm -f "$done".*
    DONE_FILE="$done" TOKENS="$1" wrk -t"$threads" -c"$connections" -d3600s --latency -s Benchmarks/e2e/signin.lua "$base" >"$out" &
    until_done $! "$done"
    grep RESULT "$out"
}

# phase NAME TARGET_URL REQUESTS SAVE [ENV...]: every request of REQUESTS (lines web.lua reads)
# sent once, what each answer leads to saved in SAVE (web.lua's EXTRACT); prints RESULT, timed
# from the first request to the last answer (as signin_all, at most ~0.3 s too long).
phase() {
    local name=$1 url=$2 requests=$3 save=$4 out="$work/wrk.out" done="$work/.wrk-done"
    shift 4
    rm -f "$done".* "$save".*
    env "$@" REQUESTS="$requests" SAVE="$save" DONE_FILE="$done" \
        wrk -t"$threads" -c"$connections" -d3600s --latency -s Benchmarks/e2e/web.lua "$url" >"$out" &
    until_done $! "$done"
    cat "$save".* >"$save"
    echo "   $name: $(grep RESULT "$out") (next phase: $(wc -l <"$save") requests)"
}

# CPU time (user + system, clock ticks) of every live process named COMM.
cpu_ticks() {
    local ticks=0 pid
    for pid in $(pgrep -x "$1"); do
        ticks=$(( ticks + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0) ))
    done
    echo "$ticks"
}
# cpu_start; <phase>; cpu_report REQUESTS: the broker's and PostgreSQL's CPU during the phase,
# in all and per request, to tell which side a phase's cost is on (and PgBouncer's, with POOLER).
# machine_busy_ticks: the CPU the whole machine spent outside idle and iowait since boot (from
# /proc/stat), so that a phase's "other" (MockIdP, wrk and its script, the rest) is what the
# machine spent besides the broker and PostgreSQL; wrk's own process ends with its phase.
machine_busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
cpu_start() {
    broker_ticks=$(cpu_ticks broker) pg_ticks=$(cpu_ticks postgres) bouncer_ticks=$(cpu_ticks pgbouncer)
    mockidp_ticks=$(cpu_ticks mock-idp) machine_ticks=$(machine_busy_ticks) cpu_wall=$(date +%s.%N)
}
cpu_report() {
    local hz broker pg
    hz=$(getconf CLK_TCK)
    broker=$(( $(cpu_ticks broker) - broker_ticks )) pg=$(( $(cpu_ticks postgres) - pg_ticks ))
    # A process of either kind that ended during the phase took its ticks with it (at-once.sh:
    # the other build's broker restarting); the difference means nothing then.
    if (( broker < 0 || pg < 0 )); then
        echo "   (CPU during the phase: not measured, a broker or PostgreSQL process ended during it)"
        return
    fi
    echo "   (CPU during the phase: broker $(( broker / hz )).$(( broker % hz * 100 / hz ))s, PostgreSQL $(( pg / hz )).$(( pg % hz * 100 / hz ))s, wall $(echo "$(date +%s.%N) - $cpu_wall" | bc)s; per request: broker $(( broker * 1000000 / hz / $1 )) µs, PostgreSQL $(( pg * 1000000 / hz / $1 )) µs)"
    local mockidp=$(( $(cpu_ticks mock-idp) - mockidp_ticks )) machine=$(( $(machine_busy_ticks) - machine_ticks ))
    local other=$(( machine - broker - pg - mockidp ))
    (( other < 0 )) && other=0
    echo "   (the rest of the machine per request: MockIdP $(( mockidp * 1000000 / hz / $1 )) µs, everything else (wrk, the kernel's own threads) $(( other * 1000000 / hz / $1 )) µs)"
    if [ -n "${POOLER:-}" ]; then
        local bouncer=$(( $(cpu_ticks pgbouncer) - bouncer_ticks ))
        echo "   (PgBouncer during the phase: $(( bouncer / hz )).$(( bouncer % hz * 100 / hz ))s, $(( bouncer * 1000000 / hz / $1 )) µs per request)"
    fi
}

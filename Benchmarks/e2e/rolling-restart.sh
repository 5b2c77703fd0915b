#!/usr/bin/env bash
# Rolling restart with no failed request (issue 43, part 3; decision 0087): two `broker serve`
# instances on one PostgreSQL (TCP, initdb's defaults) behind Debian's HAProxy, which checks each
# instance's /readyz every 200 ms (down after 2 failures, up after 2 successes). wrk sends
# sign-ins through HAProxy for the whole run while each instance in turn gets SIGTERM, drains
# (BROKER_DRAIN_SECONDS, default here 2 s: above HAProxy's 2 × 200 ms to notice), stops, and is
# started again; the next one goes once HAProxy has the first back. Prints wrk's RESULT line
# (errors and status_non2xx are the failed requests: 0 is the requirement) and each step's time.
# Usage: [BIN=DIR] [DRAIN=2] [DURATION=30] Benchmarks/e2e/rolling-restart.sh
set -euo pipefail
export TARGET=tcp
command -v haproxy >/dev/null || export PATH=$PATH:/usr/sbin
if ! command -v haproxy >/dev/null; then
    [[ $(id -u) -eq 0 ]] || { echo "rolling-restart: haproxy is missing: sudo apt-get install -y haproxy" >&2; exit 1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends haproxy >/dev/null
fi
haproxy_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# Both instances answer as the address clients use (one issuer for the tokens either signs).
export BROKER_PUBLIC_URL=http://127.0.0.1:$haproxy_port BROKER_DRAIN_SECONDS=${DRAIN:-2}
source "$(dirname "$0")/lib.sh"
duration=${DURATION:-30}

# The second instance (lib.sh started the first on $broker_port).
second_port=$(free_port)
start_instance() { # port -> pid in $started
    BROKER_PORT=$1 "$bin/broker" serve >>"$work/broker-$1.log" 2>&1 &
    started=$!
    pids+=($started)
    for _ in $(seq 300); do curl -sf "http://127.0.0.1:$1/readyz" >/dev/null && return; sleep 0.1; done
    echo "the instance on port $1 did not become ready:" >&2
    tail -20 "$work/broker-$1.log" >&2
    exit 1
}
start_instance "$second_port"
second_pid=$started
first_port=$broker_port first_pid=$broker_pid

cat >"$work/haproxy.cfg" <<CFG
global
    maxconn 4096
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    retries 3
    option redispatch
frontend broker
    bind 127.0.0.1:$haproxy_port
    default_backend instances
backend instances
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
    default-server inter 200ms fall 2 rise 2
    server first 127.0.0.1:$first_port check
    server second 127.0.0.1:$second_port check
CFG
haproxy -f "$work/haproxy.cfg" -db >"$work/haproxy.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$haproxy_port/readyz" >/dev/null && break; sleep 0.1; done
# Until HAProxy has both up (2 checks each).
sleep 1

echo "rolling-restart: minting tokens..." >&2
mint "$work/tokens.txt" rolling. $(( duration * 3000 )) 20000
start=$(date +%s.%N)
at() { printf '%.1f s' "$(echo "$(date +%s.%N) - $start" | bc)"; }
TOKENS="$work/tokens.txt" wrk -t"$threads" -c"$connections" -d"${duration}s" --latency -s Benchmarks/e2e/signin.lua \
    "http://127.0.0.1:$haproxy_port" >"$work/wrk.out" &
wrk_pid=$!
sleep 5
restart() { # name port pid
    echo "== $(at): SIGTERM to the $1 instance (port $2)"
    kill -TERM "$3"
    wait "$3" 2>/dev/null || true
    echo "   $(at): it exited; starting it again"
    start_instance "$2"
    echo "   $(at): ready again"
    # Until HAProxy has it back (2 checks 200 ms apart, with a margin).
    sleep 1
}
restart first "$first_port" "$first_pid"
restart second "$second_port" "$second_pid"
echo "== $(at): both restarted; wrk runs to ${duration}s"
wait "$wrk_pid"
grep RESULT "$work/wrk.out"
echo "== HAProxy saw: $(grep -c 'is DOWN' "$work/haproxy.log" || true) server(s) go down, $(grep -c 'is UP' "$work/haproxy.log" || true) come up"

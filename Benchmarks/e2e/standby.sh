# Sourced by lib.sh when STANDBY=1 (TARGET=tcp), right after it started the primary: a
# synchronous streaming standby of it and Debian's HAProxy in front of both, as
# docs/scaling.md ("A PostgreSQL failover") sets them up. Everything after this (the migration,
# the CLI, the broker, psql_db) reaches PostgreSQL through HAProxy: $pg_port becomes HAProxy's.
# Leaves $primary_port, $standby_port, $primary_pid (the postmaster) and $standby_dir.
# The standby: `pg_basebackup -R` (it streams as application_name `standby`), started with
# initdb's defaults; then the primary waits for it on every commit (`synchronous_standby_names`,
# `synchronous_commit` on, the default), so a commit the broker saw is on both.
# HAProxy, mode tcp: the primary, and the standby as `backup`, checked by a TCP connect every
# 200 ms (down after 2 failures). When the primary is gone it sends new connections to the
# standby, which refuses writes until it is promoted; connections to a server marked down are
# cut (`on-marked-down shutdown-sessions`). A production check asks which node is the primary
# (Patroni's `/primary`); with this one the broker meets the standby before its promotion too.
command -v haproxy >/dev/null || export PATH=$PATH:/usr/sbin
if ! command -v haproxy >/dev/null; then
    [[ $(id -u) -eq 0 ]] || { echo "standby: haproxy is missing: sudo apt-get install -y haproxy" >&2; exit 1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends haproxy >/dev/null
fi
primary_port=$pg_port
primary_pid=$(head -1 "$work/pg/postmaster.pid")
standby_port=$(free_port)
standby_dir=$work/standby
mkdir -p "$standby_dir"
chmod 700 "$standby_dir"
[[ $(id -u) -eq 0 ]] && chown postgres:postgres "$standby_dir"
# (It skips the primary's socket file, which lives in its data folder, with a warning.)
run_pg "$pg_bin/pg_basebackup" -h 127.0.0.1 -p "$primary_port" -U postgres -D "$standby_dir" -R -X stream \
    -d "application_name=standby" 2>&1 | { grep -v 'skipping special file' >&2 || true; }
run_pg "$pg_bin/pg_ctl" -D "$standby_dir" -l "$standby_dir/server.log" -w -s \
    -o "-c listen_addresses=127.0.0.1 -p $standby_port -k $standby_dir" start
psql -h 127.0.0.1 -p "$primary_port" -U postgres -qXc "ALTER SYSTEM SET synchronous_standby_names = 'standby'" postgres
psql -h 127.0.0.1 -p "$primary_port" -U postgres -qXAtc "SELECT pg_reload_conf()" postgres >/dev/null
for _ in $(seq 100); do
    [ "$(psql -h 127.0.0.1 -p "$primary_port" -U postgres -qXAtc \
        "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby'" postgres)" = sync ] && break
    sleep 0.1
done
haproxy_pg_port=$(free_port)
cat >"$work/haproxy-pg.cfg" <<CFG
global
    maxconn 1000
defaults
    mode tcp
    timeout connect 2s
    # Pooled connections sit idle between requests: HAProxy must not cut them.
    timeout client 1h
    timeout server 1h
listen postgres
    bind 127.0.0.1:$haproxy_pg_port
    default-server inter 200ms fall 2 rise 2 on-marked-down shutdown-sessions
    server primary 127.0.0.1:$primary_port check
    server standby 127.0.0.1:$standby_port check backup
CFG
haproxy -f "$work/haproxy-pg.cfg" -db >"$work/haproxy-pg.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do psql -h 127.0.0.1 -p "$haproxy_pg_port" -U postgres -qXAtc "SELECT 1" postgres >/dev/null 2>&1 && break; sleep 0.1; done
pg_port=$haproxy_pg_port
echo "   (PostgreSQL through HAProxy on 127.0.0.1:$pg_port: primary $primary_port, synchronous standby $standby_port)" >&2

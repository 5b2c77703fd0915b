#!/usr/bin/env bash
# Bulk import benchmark (issue 24): ACCOUNTS accounts with about 1.5 identities each, written by
# generate.py in FORMAT, imported with `broker import users` into a freshly migrated embedded
# PostgreSQL (the embedded default), then the same file again (every record unchanged), then the
# same rows written by a raw COPY into the same tables of a second fresh embedded database, as
# the baseline. Release broker, tenant made and configured with the CLI, no tuning, no statistics
# step. While a phase runs, a `broker serve` keeps its cluster running, as in a deployment: the
# figures hold no PostgreSQL start or stop. Only one cluster runs at a time.
# The file is generated first (timed, not part of any figure). Prints RESULT lines.
# Usage: [ACCOUNTS=1000000] [FORMAT=jsonl|firebase|auth0|supabase] [SEED=1] [IDENTITIES_PER_ACCOUNT=1.5] \
#        [IMPORT_ARGS="--batch-size 10000"] Benchmarks/import/run.sh
# IMPORT_ARGS: more options for both `broker import users` runs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
accounts=${ACCOUNTS:-1000000} format=${FORMAT:-jsonl} seed=${SEED:-1} per_account=${IDENTITIES_PER_ACCOUNT:-1.5}
case "$format" in
jsonl) extension=jsonl ;;
firebase) extension=json ;;
auth0) extension=ndjson ;;
supabase) extension=jsonl ;;
*) echo "FORMAT must be jsonl, firebase, auth0 or supabase" >&2; exit 2 ;;
esac
scripts/setup.sh
# GNU time: the import's peak RSS and CPU time.
if [ ! -x /usr/bin/time ]; then
    [[ $(id -u) -eq 0 ]] || { echo "bench: GNU time is missing: sudo apt-get install -y time" >&2; exit 1; }
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null
fi
scratch=.build-release
swift build -c release --scratch-path "$scratch" --product broker >/dev/null
bin=$(swift build -c release --scratch-path "$scratch" --show-bin-path)
broker=$bin/broker
work=$(mktemp -d "${TMPDIR:-/tmp}/identitybroker-import.XXXXXX")
chmod 711 "$work"
# The embedded default: each database is a BROKER_DATA_DIR, its master key generated there.
unset DATABASE_URL BROKER_MASTER_KEY
export BROKER_LOG_LEVEL=warning BROKER_LOG_FORMAT=text
import_data=$work/data copy_data=$work/copy rows=$work/rows
team=TEAM000001 facebook_app=1000000000001
file=$work/users.$extension
serve_pid=

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
now() { date +%s.%N; }
seconds() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
# The cluster's socket folder: DIR/run, or the folder DIR/socket-dir names when that path is too long.
socket_dir() { if [ -f "$1/socket-dir" ]; then cat "$1/socket-dir"; else echo "$1/run"; fi; }
psql_at() { local dir=$1; shift; psql -h "$(socket_dir "$dir")" -U postgres -X -v ON_ERROR_STOP=1 -Atq "$@" postgres; }
broker_at() { local dir=$1; shift; BROKER_DATA_DIR=$dir "$broker" "$@"; }

# start_serve DIR: `broker serve` on the data folder DIR, which keeps its cluster running.
start_serve() {
    local port log=$work/serve.$(basename "$1").log
    port=$(free_port)
    BROKER_DATA_DIR=$1 BROKER_PORT=$port "$broker" serve >>"$log" 2>&1 &
    serve_pid=$!
    for _ in $(seq 900); do
        curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && return 0
        kill -0 "$serve_pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "broker serve did not become ready:" >&2
    tail -20 "$log" >&2
    exit 1
}
# stop_serve: SIGTERM; the server stops the cluster before it exits.
stop_serve() {
    if [ -n "$serve_pid" ]; then
        kill "$serve_pid" 2>/dev/null || true
        wait "$serve_pid" 2>/dev/null || true
        serve_pid=
    fi
}
cleanup() {
    stop_serve
    rm -rf "$work"
}
trap cleanup EXIT

echo "format: $format; accounts: $accounts; identities per account: $per_account; seed: $seed; work: $work" >&2

# The baseline's database first: the COPY rows carry its tenant id.
broker_at "$copy_data" db migrate >/dev/null
copy_tenant=$(broker_at "$copy_data" tenant create bench --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')

echo "== generating $file (not part of any figure)"
start=$(now)
python3 Benchmarks/import/generate.py --format "$format" --accounts "$accounts" --identities-per-account "$per_account" \
    --seed "$seed" --team "$team" --facebook-app "$facebook_app" --out "$file" --copy-dir "$rows" --tenant-id "$copy_tenant"
echo "   ($(seconds "$start" "$(now)") s; file $(du -m "$file" | cut -f1) MiB; COPY rows $(du -cm "$rows"/*.tsv | tail -1 | cut -f1) MiB)"
identities=$(wc -l <"$rows/identities.tsv")

# The tenant that imports, configured with the CLI: Apple team, Google, Facebook.
start_serve "$import_data"
openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | openssl pkcs8 -topk8 -nocrypt >"$work/AuthKey.p8"
printf '%s\n' bench-facebook-app-secret >"$work/facebook-secret.txt"
broker_at "$import_data" tenant create bench >/dev/null
broker_at "$import_data" apple team set --tenant bench --team-id "$team" --key-id KEY0000001 \
    --private-key-file "$work/AuthKey.p8" >/dev/null
broker_at "$import_data" apple group add --tenant bench --primary-app-id com.bench.app >/dev/null
broker_at "$import_data" provider enable google --tenant bench --client-id 1-web.apps.googleusercontent.com \
    --platforms android,web >/dev/null
broker_at "$import_data" provider enable facebook --tenant bench --app-id "$facebook_app" \
    --app-secret-file "$work/facebook-secret.txt" --platforms android,web >/dev/null

# run_import PHASE EXPECT: `broker import users` under GNU time; prints its figures and RESULT.
# EXPECT (created or unchanged) is the count every record should have.
run_import() {
    local phase=$1 expect=$2 start end
    start=$(now)
    if ! BROKER_DATA_DIR=$import_data /usr/bin/time -v -o "$work/$phase.time" "$broker" import users --tenant bench \
        --from "$format" --file "$file" --json ${IMPORT_ARGS:-} >"$work/$phase.json" 2>"$work/$phase.err"; then
        echo "broker import users failed ($phase):" >&2
        tail -20 "$work/$phase.err" >&2
        cat "$work/$phase.json" >&2
        exit 1
    fi
    end=$(now)
    python3 - "$phase" "$expect" "$(seconds "$start" "$end")" "$work/$phase.json" "$work/$phase.time" "$format" \
        "$accounts" "$identities" <<'EOF'
import json, re, sys
phase, expect, wall, report, timing, fmt, accounts, identities = sys.argv[1:]
wall, accounts, identities = float(wall), int(accounts), int(identities)
job = json.load(open(report))
text = open(timing).read()
def field(name):
    return float(re.search(re.escape(name) + r":\s*([0-9.]+)", text).group(1))
rss_mib = field("Maximum resident set size (kbytes)") / 1024
cpu = field("User time (seconds)") + field("System time (seconds)")
counts = " ".join("%s=%d" % (k, job[k]) for k in ("records", "created", "updated", "unchanged", "conflicts", "skipped", "errors"))
print("   (%s: job %s, %s, %d identities written; broker CPU %.1f s)" % (job["status"], job["job_id"], counts, job["identities"], cpu))
if job[expect] != accounts or job["records"] != accounts:
    print("   WARNING: expected %d records, all %s" % (accounts, expect))
print("RESULT phase=%s format=%s accounts=%d identities=%d wall_s=%.1f records_per_s=%.0f max_rss_mib=%.1f cpu_s=%.1f %s"
      % (phase, fmt, accounts, identities, wall, accounts / wall if wall > 0 else 0, rss_mib, cpu, counts))
EOF
    if [ -s "$file.errors.jsonl" ]; then
        echo "   (first lines not imported, of $(wc -l <"$file.errors.jsonl"), in $file.errors.jsonl:)"
        head -3 "$file.errors.jsonl" | sed 's/^/   /'
    fi
    import_wall=$(seconds "$start" "$end")
}

echo "== import: $accounts accounts, $identities identities, $format, into an empty tenant"
run_import import created
first_wall=$import_wall
echo "   (in the database: $(psql_at "$import_data" -c "SELECT count(*) FROM accounts") accounts," \
    "$(psql_at "$import_data" -c "SELECT count(*) FROM identities") identities)"
echo "== the same file again (every record unchanged)"
rm -f "$file.errors.jsonl"
run_import reimport unchanged
second_wall=$import_wall
stop_serve

echo "== raw COPY of the same rows into the same tables (a second fresh embedded database, one transaction)"
start_serve "$copy_data"
cat >"$work/copy.sql" <<EOF
BEGIN;
\copy accounts (id, tenant_id, external_id, given_name, family_name, display_name, email, email_verified, is_private_email, status, created_at) FROM '$rows/accounts.tsv'
\copy identities (id, tenant_id, account_id, provider, provider_scope, subject, email, email_verified, is_private_email, created_at) FROM '$rows/identities.tsv'
COMMIT;
EOF
start=$(now)
psql_at "$copy_data" -f "$work/copy.sql"
copy_wall=$(seconds "$start" "$(now)")
copied_accounts=$(psql_at "$copy_data" -c "SELECT count(*) FROM accounts")
copied_identities=$(psql_at "$copy_data" -c "SELECT count(*) FROM identities")
stop_serve
echo "   (in the database: $copied_accounts accounts, $copied_identities identities)"
awk -v a="$copied_accounts" -v i="$copied_identities" -v w="$copy_wall" \
    'BEGIN { printf "RESULT phase=copy accounts=%d identities=%d wall_s=%.1f records_per_s=%.0f\n", a, i, w, (w > 0 ? a / w : 0) }'
awk -v f="$first_wall" -v s="$second_wall" -v c="$copy_wall" -v fmt="$format" \
    'BEGIN { printf "RESULT phase=summary format=%s import_s=%.1f reimport_s=%.1f copy_s=%.1f import_over_copy=%.2f\n", fmt, f, s, c, (c > 0 ? f / c : 0) }'
echo "(issue 24's targets, for 1,000,000 jsonl accounts: import <= 60 s and <= 3x COPY, RSS <= 200 MiB, the same file again <= 30 s)"

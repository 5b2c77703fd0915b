#!/usr/bin/env bash
# Sign-in rates on a tenant that holds ACCOUNTS imported accounts (issue 24: "sign-in rates
# unchanged on a tenant with 1,000,000 accounts"). The end-to-end setup of Benchmarks/e2e
# (lib.sh: release broker on the embedded default, freshly migrated, tenant `bench`, MockIdP,
# wrk -t1 -c16, no manual step), then, each phase all of its tokens posted:
#   1. the empty tenant: SIGNINS new people, then the same people again (returning);
#   2. `broker import users` of ACCOUNTS accounts (jsonl), each with an Apple identity
#      (subject imp.N of the tenant's team) and the email its tokens carry (user<N>@example.com,
#      verified, as a source's export has it), every other one with a Google identity too;
#      EMAILS=0 imports them without emails;
#   3. the people of phase 1 again; the same two phases with other new people; and SIGNINS
#      imported people signing in through the broker for the first time (their accounts
#      exist; `is_new_account` false), then those people again.
# Usage: [ACCOUNTS=1000000] [SIGNINS=50000] [BIN=DIR] Benchmarks/import/signin-after.sh
source "$(dirname "$0")/../e2e/lib.sh"
accounts=${ACCOUNTS:-1000000}
signins=${SIGNINS:-50000}

# phase NAME TOKENS: every token posted once; prints the rate with the broker's and PostgreSQL's
# CPU, and the blocks PostgreSQL found in its shared buffers and those it had to read (from the
# OS's cache or the disk) per sign-in.
blocks() { psql_db "SELECT blks_hit || ' ' || blks_read FROM pg_stat_database WHERE datname = current_database()"; }
phase() {
    echo "== $1 (from $(date -u +%T))"
    local before after
    before=$(blocks)
    cpu_start
    signin_all "$2"
    cpu_report "$signins"
    after=$(blocks)
    python3 -c 'import sys; b = sys.argv[1].split(); a = sys.argv[2].split(); n = int(sys.argv[3]); print(f"   (blocks per sign-in: {(int(a[0]) - int(b[0])) / n:.1f} hit, {(int(a[1]) - int(b[1])) / n:.2f} read)")' "$before" "$after" "$signins"
    rm -f "$2"
}

mint "$work/new.0.txt" "new0." "$signins"
phase "new users, empty tenant ($signins)" "$work/new.0.txt"
mint "$work/again.0.txt" "new0." "$signins"
phase "returning users, empty tenant ($signins)" "$work/again.0.txt"

file=$work/import.jsonl
python3 - "$file" "$accounts" "${EMAILS:-1}" <<'PY'
import sys
path, count, emails = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
with open(path, "w") as out:
    for n in range(count):
        mail = f',"email":"user{n}@example.com","email_verified":true' if emails else ""
        google = f',{{"provider":"google","subject":"imp-g.{n}"}}' if n % 2 == 0 else ""
        out.write(f'{{"external_id":"imp-{n}"{mail},"identities":[{{"provider":"apple","subject":"imp.{n}"{mail}}}{google}]}}\n')
PY
echo "== import of $accounts accounts (from $(date -u +%T))"
start=$(date +%s.%N)
"$bin/broker" import users --tenant bench --from jsonl --file "$file" --json >"$work/import.json" 2>"$work/import.err" \
    || { tail -20 "$work/import.err" >&2; exit 1; }
echo "   $(echo "$(date +%s.%N) - $start" | bc) s: $(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print({k: j[k] for k in ("records", "created", "errors")})' "$work/import.json")"
rm -f "$file"
echo "   accounts in the tenant: $(psql_db "SELECT count(*) FROM accounts")"

mint "$work/again.0b.txt" "new0." "$signins"
phase "the empty tenant's people again, $accounts imported accounts later ($signins)" "$work/again.0b.txt"
mint "$work/new.1.txt" "new1." "$signins"
phase "new users, $accounts imported accounts ($signins)" "$work/new.1.txt"
mint "$work/again.1.txt" "new1." "$signins"
phase "returning users, $accounts imported accounts ($signins)" "$work/again.1.txt"
# Imported people from a third of the way into the file on, SIGNINS of them.
mint "$work/imported.txt" "imp." "$signins" "$accounts" $(( accounts / 3 ))
phase "imported people's first sign-in through the broker ($signins)" "$work/imported.txt"
echo "   (accounts now: $(psql_db "SELECT count(*) FROM accounts"); imported ones signed in: $(psql_db "SELECT count(*) FROM accounts WHERE import_job_id IS NOT NULL AND last_seen_at IS NOT NULL"))"
mint "$work/imported.again.txt" "imp." "$signins" "$accounts" $(( accounts / 3 ))
phase "imported people again ($signins)" "$work/imported.again.txt"
echo "== broker RSS: peak $(peak_rss)"
# When PostgreSQL's own upkeep (autovacuum, which it starts by itself after the import) last ran
# on the grown tables: it shares the two cores with the phases that follow. Only its statistics
# are read; the script runs no VACUUM or ANALYZE.
echo "== autovacuum (UTC): $(psql_db "SELECT string_agg(relname || ' vacuum ' || coalesce(to_char(last_autovacuum AT TIME ZONE 'UTC', 'HH24:MI:SS'), '-') || ' analyze ' || coalesce(to_char(last_autoanalyze AT TIME ZONE 'UTC', 'HH24:MI:SS'), '-'), '; ' ORDER BY relname) FROM pg_stat_user_tables WHERE relname IN ('accounts', 'identities', 'sessions')")"

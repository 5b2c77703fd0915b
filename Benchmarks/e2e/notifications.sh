#!/usr/bin/env bash
# Apple server-to-server notifications end to end (issue 23): release binaries, a freshly
# migrated database, MockIdP's Apple key signing the notifications, wrk posting each one once
# to POST /apple/notifications. PEOPLE Apple accounts are signed in first (unmeasured); then
# one notification per person of each type, in turn: email-disabled, email-enabled (both
# change one identity row) and consent-revoked (sessions revoked, identity unlinked, account
# disabled); then every person signs in with Apple again (unmeasured: a new consent re-links and
# re-enables the account) and account-delete follows (identity deleted, account tombstoned).
# Each is verified, deduplicated by jti, applied, audited and written to the events outbox.
# Prints wrk's RESULT line and the CPU per notification.
# Usage: Benchmarks/e2e/notifications.sh   (PEOPLE=20000 by default)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
people=${PEOPLE:-20000}
echo "target: $target; seeding $people Apple accounts (unmeasured)..." >&2
mint "$work/people.txt" note. "$people"
signin_all "$work/people.txt" >/dev/null
for type in email-disabled email-enabled consent-revoked account-delete; do
    if [ "$type" = account-delete ]; then
        echo "   (signing the $people people in with Apple again, unmeasured)" >&2
        mint "$work/people-again.txt" note. "$people"
        signin_all "$work/people-again.txt" >/dev/null
    fi
    "$bin/mock-idp" mint --provider apple --key-file "$work/idp-key.pem" --audience com.bench.app --notification "$type" \
        --subject-prefix note. --count "$people" >"$work/$type.txt"
    echo "== $type ($people notifications, each posted once, $connections connections)"
    cpu_start
    PROVIDER=apple_notification signin_all "$work/$type.txt"
    cpu_report "$people"
done
echo "   receipts: $(psql_db 'SELECT outcome, count(*) FROM notification_receipts GROUP BY 1 ORDER BY 1' | tr '\n' ' ')"
echo "   events: $(psql_db 'SELECT event_type, count(*) FROM events_outbox GROUP BY 1 ORDER BY 1' | tr '\n' ' ')"
echo "   broker peak RSS: $(peak_rss)"

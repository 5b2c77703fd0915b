import BrokerCore
import Foundation
import Logging
import PostgresNIO

/// Apple's `account-delete` in one statement, for every notification of it that arrives
/// together (decision 0058; ``UnlinkingNotificationStatement``): each element's receipt, the
/// identity's sessions ended, the identity deleted with its remembered consent revocation, and
/// when the account has no identity left, the account made a tombstone (its other sessions ended,
/// nothing personal kept, its consent revocations forgotten; `account.deleted` audited and
/// announced), or when it keeps other identities, its email and name cleared where they came
/// only from Apple; then the `apple.account_deleted` audit row and event and `identity.unlinked`.
/// A second delivery of a `jti` finds its receipt taken and writes nothing.
struct AccountDeleteNotificationStatement: UnlinkingNotificationStatement {
    typealias Row = PostgresRow

    static let name = "ib_account_delete_notification"

    let elements: [AppleNotificationElement]

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 4)
        bindings.append(json)  // $1
        bindings.append("account-delete")  // $2: the receipt's event type
        bindings.append(AppleNotificationRepository.appleAccountDeleteReason)  // $3
        bindings.append(AccountDeletionRepository.sessionRevokeReason)  // $4
        return bindings
    }

    /// Rows are reached and locked as in ``ConsentRevocationStatement`` (the shared head).
    /// The identity's own sessions end with `$3`; the account's others, when it goes, with `$4`
    /// (a session is changed once per statement, so one `UPDATE` does both). The tombstone clears
    /// the columns ``AccountDeletionRepository/tombstone(tenantID:accountID:reason:on:logger:)``
    /// clears; a personal column added to `accounts` is cleared in both.
    static let sql = """
        \(unlinkingHead)
        going AS MATERIALIZED (
            SELECT x.n, x.t, x.account_id FROM target x JOIN remaining rm ON rm.n = x.n WHERE rm.left_over = 0
        ),
        ended AS (
            UPDATE sessions s SET revoked_at = now(),
                revoke_reason = CASE WHEN s.identity_id = x.identity_id THEN $3::text ELSE $4::text END
            FROM target x
            WHERE s.tenant_id = x.t AND s.account_id = x.account_id AND s.revoked_at IS NULL
                AND (s.identity_id = x.identity_id OR x.n IN (SELECT g.n FROM going g))
            RETURNING s.account_id
        ),
        deleted AS (
            DELETE FROM identities d USING target x WHERE d.account_id = x.account_id AND d.id = x.identity_id RETURNING d.id
        ),
        forgotten AS (
            DELETE FROM consent_revocations c USING target x
            WHERE c.tenant_id = x.t AND c.provider = x.pr AND c.provider_scope = x.sc AND c.subject = x.u
        ),
        forgotten_with_account AS (
            -- A row both delete is deleted once: the second finds it gone by this statement.
            DELETE FROM consent_revocations c USING going g WHERE c.tenant_id = g.t AND c.account_id = g.account_id
        ),
        tombstoned AS (
            UPDATE accounts a SET status = 'deleted', deleted_at = now(), deleted_reason = $3::text, disabled_reason = NULL,
                given_name = NULL, family_name = NULL, display_name = NULL, email = NULL, email_verified = false,
                is_private_email = false, updated_at = now()
            FROM going g
            WHERE a.tenant_id = g.t AND a.id = g.account_id
        ),
        scrubbed AS (
            -- An account that keeps other identities loses what came only from Apple: its
            -- email and name where they are the deleted identity's and no identity it keeps
            -- has them (issue 39 A4). Its rows are not the tombstone's (left_over > 0); every
            -- identity is reached by its account, as in the head.
            UPDATE accounts a SET
                email = CASE WHEN s.drop_email THEN NULL ELSE a.email END,
                email_verified = CASE WHEN s.drop_email THEN false ELSE a.email_verified END,
                is_private_email = CASE WHEN s.drop_email THEN false ELSE a.is_private_email END,
                given_name = CASE WHEN s.drop_given THEN NULL ELSE a.given_name END,
                family_name = CASE WHEN s.drop_family THEN NULL ELSE a.family_name END,
                display_name = CASE WHEN s.drop_display THEN NULL ELSE a.display_name END,
                updated_at = now()
            FROM (
                SELECT x.t, x.account_id,
                    c.email_key = lower(i.email) AND NOT coalesce(k.email, false) AS drop_email,
                    c.given_name = i.given_name AND NOT coalesce(k.given, false) AS drop_given,
                    c.family_name = i.family_name AND NOT coalesce(k.family, false) AS drop_family,
                    c.display_name = i.display AND NOT coalesce(k.display, false) AS drop_display
                FROM target x
                JOIN remaining rm ON rm.n = x.n AND rm.left_over > 0
                JOIN accounts c ON c.tenant_id = x.t AND c.id = x.account_id
                CROSS JOIN LATERAL (
                    SELECT d.email, d.given_name, d.family_name,
                        nullif(trim(concat_ws(' ', d.given_name, d.family_name)), '') AS display
                    FROM identities d WHERE d.account_id = x.account_id AND d.id = x.identity_id) i
                CROSS JOIN LATERAL (
                    SELECT bool_or(lower(o.email) = lower(i.email)) AS email, bool_or(o.given_name = i.given_name) AS given,
                        bool_or(o.family_name = i.family_name) AS family,
                        bool_or(nullif(trim(concat_ws(' ', o.given_name, o.family_name)), '') = i.display) AS display
                    FROM identities o WHERE o.account_id = x.account_id AND o.id <> x.identity_id) k
            ) s
            WHERE a.tenant_id = s.t AND a.id = s.account_id AND (s.drop_email OR s.drop_given OR s.drop_family OR s.drop_display)
        ),
        details AS MATERIALIZED (
            SELECT x.n, x.t, x.identity_id, x.account_id, g.n IS NOT NULL AS gone,
                (SELECT count(*) FROM ended e WHERE e.account_id = x.account_id) AS revoked,
                jsonb_strip_nulls(jsonb_build_object(
                    'account_id', x.account_id::text, 'identity_id', x.identity_id::text, 'event_time', x.etx,
                    'account_deleted', g.n IS NOT NULL)) AS payload
            FROM target x LEFT JOIN going g ON g.n = x.n
        ),
        audited AS (
            INSERT INTO audit_log (tenant_id, actor, action, target, details)
            SELECT w.t, 'apple', w.action, w.target, w.details FROM (
                SELECT d.n, 1 AS k, d.t, 'account.deleted' AS action, d.account_id::text AS target, jsonb_build_object(
                    'account_id', d.account_id::text, 'reason', $3::text, 'revoked_sessions', d.revoked,
                    'deleted_identities', 1, 'apple_revocations_queued', 0) AS details
                FROM details d WHERE d.gone
                UNION ALL
                SELECT d.n, 2, d.t, 'apple.account_deleted', d.identity_id::text,
                    d.payload || jsonb_build_object('revoked_sessions', d.revoked)
                FROM details d
                UNION ALL
                SELECT r.n, 2, r.t, 'apple.notification_unmatched', NULL, jsonb_build_object('type', 'account-delete')
                FROM received r WHERE r.identity_id IS NULL
            ) w
            ORDER BY w.n, w.k
        ),
        announced AS (
            INSERT INTO events_outbox (tenant_id, account_id, event_type, payload)
            SELECT e.t, e.account_id, e.event_type, e.payload FROM (
                SELECT d.n, 1 AS k, d.t, d.account_id, 'account.deleted' AS event_type,
                    jsonb_build_object('account_id', d.account_id::text, 'reason', $3::text) AS payload
                FROM details d WHERE d.gone
                UNION ALL
                SELECT d.n, 2, d.t, d.account_id, 'apple.account_deleted', d.payload FROM details d
                UNION ALL
                SELECT d.n, 3, d.t, d.account_id, 'identity.unlinked', jsonb_build_object(
                    'account_id', d.account_id::text, 'identity_id', d.identity_id::text, 'provider', 'apple',
                    'reason', 'account-delete')
                FROM details d
            ) e
            ORDER BY e.n, e.k
        )
        \(unlinkingResults)
        """
}

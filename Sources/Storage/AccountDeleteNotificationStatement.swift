import BrokerCore
import Foundation
import Logging
import PostgresNIO

/// Apple's `account-delete` in one statement, for every notification of it that arrives
/// together (decision 0058; ``UnlinkingNotificationStatement``): each element's receipt, the
/// identity's sessions ended, the identity deleted with its remembered consent revocation, and
/// when the account has no identity left, the account made a tombstone (its other sessions ended,
/// nothing personal kept, its consent revocations forgotten; `account.deleted` audited and
/// announced); then the `apple.account_deleted` audit row and event and `identity.unlinked`.
/// A second delivery of a `jti` finds its receipt taken and writes nothing.
struct AccountDeleteNotificationStatement: UnlinkingNotificationStatement {
    typealias Row = PostgresRow

    static let name = "ib_account_delete_notification"

    let elements: [AppleNotificationElement]

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 3)
        bindings.append(json)  // $1
        bindings.append(AppleNotificationRepository.appleAccountDeleteReason)  // $2
        bindings.append(AccountDeletionRepository.sessionRevokeReason)  // $3
        return bindings
    }

    /// Rows are reached and locked as in ``ConsentRevocationStatement``. `pr` is the provider as
    /// a column, so that the consent revocation's lookup joins on every column of its key rather
    /// than scanning for the constant.
    /// The identity's own sessions end with `$2`; the account's others, when it goes, with `$3`
    /// (a session is changed once per statement, so one `UPDATE` does both). The tombstone clears
    /// the columns ``AccountDeletionRepository/tombstone(tenantID:accountID:reason:on:logger:)``
    /// clears; a personal column added to `accounts` is cleared in both.
    static let sql = """
            WITH posted AS MATERIALIZED (
                SELECT * FROM json_to_recordset($1::text::json) AS p(n int, t uuid, j text, et int8, etx text, sc text, u text)
            ),
            found AS MATERIALIZED (
                SELECT p.n, i.id, i.account_id FROM posted p
                CROSS JOIN LATERAL (
                    SELECT id, account_id FROM identities
                    WHERE tenant_id = p.t AND provider = 'apple' AND provider_scope = p.sc AND subject = p.u
                    LIMIT 1
                    FOR UPDATE) i
            ),
            taken AS MATERIALIZED (
                SELECT p.*, 'apple'::text AS pr, f.id AS identity_id, f.account_id FROM posted p LEFT JOIN found f ON f.n = p.n
                WHERE f.n IS NULL OR f.n = (SELECT min(o.n) FROM found o WHERE o.account_id = f.account_id)
            ),
            receipt AS (
                INSERT INTO notification_receipts (tenant_id, jti, event_type, event_time, outcome)
                SELECT k.t, k.j, 'account-delete', to_timestamp(k.et::float8 / 1000000),
                    CASE WHEN k.identity_id IS NULL THEN 'unknown_subject' ELSE 'applied' END
                FROM taken k
                ORDER BY k.n
                ON CONFLICT (tenant_id, jti) DO NOTHING
                RETURNING tenant_id, jti
            ),
            received AS MATERIALIZED (
                SELECT k.* FROM taken k JOIN receipt r ON r.tenant_id = k.t AND r.jti = k.j
            ),
            target AS MATERIALIZED (SELECT r.* FROM received r WHERE r.identity_id IS NOT NULL),
            account AS MATERIALIZED (
                SELECT a.id FROM accounts a JOIN target x ON a.tenant_id = x.t AND a.id = x.account_id
                ORDER BY a.id
                FOR UPDATE OF a
            ),
            remaining AS MATERIALIZED (
                SELECT x.n, count(r.id)::int8 AS left_over FROM target x JOIN account c ON c.id = x.account_id
                LEFT JOIN identities r ON r.account_id = c.id AND r.id <> x.identity_id
                GROUP BY x.n
            ),
            going AS MATERIALIZED (
                SELECT x.n, x.t, x.account_id FROM target x JOIN remaining rm ON rm.n = x.n WHERE rm.left_over = 0
            ),
            ended AS (
                UPDATE sessions s SET revoked_at = now(),
                    revoke_reason = CASE WHEN s.identity_id = x.identity_id THEN $2::text ELSE $3::text END
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
                UPDATE accounts a SET status = 'deleted', deleted_at = now(), deleted_reason = $2::text, disabled_reason = NULL,
                    given_name = NULL, family_name = NULL, display_name = NULL, email = NULL, email_verified = false,
                    is_private_email = false, updated_at = now()
                FROM going g
                WHERE a.tenant_id = g.t AND a.id = g.account_id
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
                        'account_id', d.account_id::text, 'reason', $2::text, 'revoked_sessions', d.revoked,
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
                        jsonb_build_object('account_id', d.account_id::text, 'reason', $2::text) AS payload
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
            SELECT p.n, EXISTS (SELECT 1 FROM taken k WHERE k.n = p.n), EXISTS (SELECT 1 FROM received r WHERE r.n = p.n),
                EXISTS (SELECT 1 FROM target x WHERE x.n = p.n)
            FROM posted p
            """
}

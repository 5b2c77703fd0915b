import BrokerCore
import Foundation
import Logging
import PostgresNIO

/// Apple's `consent-revoked` as one statement (decision 0052): the receipt, the identity's
/// sessions ended, the identity deleted (its Apple tokens with it), the account disabled with
/// all its sessions when no identity is left, the consent revocation remembered for a later
/// re-link, the audit row and the two events. One round trip instead of about fifteen; on the
/// notification route it runs with no transaction around it, in a credential check's
/// transaction on that transaction's connection.
///
/// Every part reads the statement's one snapshot: the identities left are counted as the
/// account's others, since the deletion is not visible to the statement itself. A second
/// delivery of a `jti` finds its receipt taken and writes nothing.
struct ConsentRevocationStatement: PostgresPreparedStatement {
    typealias Row = PostgresRow

    static let name = "ib_consent_revoked"

    let event: AppleNotificationRepository.Event
    let subject: String
    let route: AppleNotificationRepository.Route

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 7)
        bindings.append(route.tenantID)  // $1
        bindings.append(event.id)  // $2
        bindings.append(event.eventTime.map { Int64(($0.timeIntervalSince1970 * 1_000_000).rounded(.towardZero)) })  // $3
        bindings.append(route.teamID)  // $4
        bindings.append(subject)  // $5
        bindings.append(event.eventTime?.iso8601String)  // $6
        bindings.append(AppleNotificationRepository.consentRevokedReason)  // $7
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }

    static let sql = """
            WITH found AS MATERIALIZED (
                SELECT i.id, i.account_id FROM identities i
                WHERE i.tenant_id = $1::uuid AND i.provider = 'apple' AND i.provider_scope = $4::text AND i.subject = $5::text
                FOR UPDATE
            ),
            receipt AS (
                INSERT INTO notification_receipts (tenant_id, jti, event_type, event_time, outcome)
                SELECT $1::uuid, $2::text, 'consent-revoked', to_timestamp($3::int8::float8 / 1000000),
                    CASE WHEN EXISTS (SELECT 1 FROM found) THEN 'applied' ELSE 'unknown_subject' END
                ON CONFLICT (tenant_id, jti) DO NOTHING
                RETURNING jti
            ),
            target AS MATERIALIZED (SELECT f.* FROM found f WHERE EXISTS (SELECT 1 FROM receipt)),
            account AS MATERIALIZED (
                SELECT a.id, a.status FROM accounts a JOIN target f ON a.id = f.account_id
                WHERE a.tenant_id = $1::uuid
                FOR UPDATE OF a
            ),
            remaining AS MATERIALIZED (
                SELECT count(r.id)::int8 AS n FROM target f LEFT JOIN identities r
                    ON r.tenant_id = $1::uuid AND r.account_id = f.account_id AND r.id <> f.id
            ),
            disabled AS (
                UPDATE accounts a SET status = 'disabled', disabled_reason = $7::text, updated_at = now()
                FROM account x, remaining rm
                WHERE a.tenant_id = $1::uuid AND a.id = x.id AND x.status = 'active' AND rm.n = 0
                RETURNING a.id
            ),
            ended AS (
                UPDATE sessions s SET revoked_at = now(), revoke_reason = $7::text
                FROM target f
                WHERE s.tenant_id = $1::uuid AND s.account_id = f.account_id AND s.revoked_at IS NULL
                    AND (s.identity_id = f.id OR EXISTS (SELECT 1 FROM disabled))
                RETURNING s.id
            ),
            deleted AS (
                DELETE FROM identities d USING target f WHERE d.tenant_id = $1::uuid AND d.id = f.id RETURNING d.id
            ),
            remembered AS (
                INSERT INTO consent_revocations (tenant_id, provider, provider_scope, subject, account_id)
                SELECT $1::uuid, 'apple', $4::text, $5::text, f.account_id FROM target f
                ON CONFLICT (tenant_id, provider, provider_scope, subject)
                    DO UPDATE SET account_id = EXCLUDED.account_id, revoked_at = now()
            ),
            details AS MATERIALIZED (
                SELECT f.id, f.account_id, jsonb_strip_nulls(jsonb_build_object(
                    'account_id', f.account_id::text, 'identity_id', f.id::text, 'event_time', $6::text,
                    'account_disabled', EXISTS (SELECT 1 FROM disabled), 'remaining_identities', (SELECT n FROM remaining))) AS payload
                FROM target f
            ),
            audited AS (
                INSERT INTO audit_log (tenant_id, actor, action, target, details)
                SELECT $1::uuid, 'apple', 'apple.consent_revoked', d.id::text,
                    d.payload || jsonb_build_object('revoked_sessions', (SELECT count(*) FROM ended))
                FROM details d
                UNION ALL
                SELECT $1::uuid, 'apple', 'apple.notification_unmatched', NULL, jsonb_build_object('type', 'consent-revoked')
                WHERE EXISTS (SELECT 1 FROM receipt) AND NOT EXISTS (SELECT 1 FROM found)
            ),
            announced AS (
                INSERT INTO events_outbox (tenant_id, account_id, event_type, payload)
                SELECT $1::uuid, d.account_id, e.event_type, e.payload
                FROM details d CROSS JOIN LATERAL (VALUES
                    (1, 'apple.consent_revoked', d.payload),
                    (2, 'identity.unlinked', jsonb_build_object(
                        'account_id', d.account_id::text, 'identity_id', d.id::text, 'provider', 'apple', 'reason', 'consent-revoked'))
                ) AS e(n, event_type, payload)
                ORDER BY e.n
            )
            SELECT EXISTS (SELECT 1 FROM receipt), EXISTS (SELECT 1 FROM target)
            """

    /// The outcome of the statement's one row.
    static func outcome(_ rows: [PostgresRow]) throws -> AppleNotificationRepository.Outcome {
        guard let row = rows.first else { return .duplicate }
        let (received, applied) = try row.decode((Bool, Bool).self)
        guard received else { return .duplicate }
        return applied ? .applied : .unknownSubject
    }
}

import BrokerCore
import Foundation
import Logging
import PostgresNIO

/// Apple's `consent-revoked` in one statement (decision 0052), for every notification of it
/// that arrives together (decision 0058; ``UnlinkingNotificationStatement``): each element's
/// receipt, the identity's sessions ended, the identity deleted (its Apple tokens with it), the
/// account disabled with all its sessions when no identity is left, the consent revocation
/// remembered for a later re-link, the audit row and the two events. On the notification route
/// it runs with no transaction around it; in a credential check's transaction, with that
/// check's one element, on that transaction's connection. A second delivery of a `jti` finds
/// its receipt taken and writes nothing.
struct ConsentRevocationStatement: UnlinkingNotificationStatement {
    typealias Row = PostgresRow

    static let name = "ib_consent_revoked"

    let elements: [AppleNotificationElement]

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 3)
        bindings.append(json)  // $1
        bindings.append("consent-revoked")  // $2: the receipt's event type
        bindings.append(AppleNotificationRepository.consentRevokedReason)  // $3
        return bindings
    }

    /// The shared head (``UnlinkingNotificationStatement/unlinkingHead``) finds, locks and counts;
    /// identities are locked in the elements' order and accounts in id order, so two batches
    /// that lock one identity in opposite orders meet PostgreSQL's deadlock detection, and their
    /// elements run again one by one.
    static let sql = """
        \(unlinkingHead)
        disabled AS (
            UPDATE accounts a SET status = 'disabled', disabled_reason = $3::text, updated_at = now()
            FROM target x JOIN account c ON c.id = x.account_id JOIN remaining rm ON rm.n = x.n
            WHERE a.tenant_id = x.t AND a.id = x.account_id AND c.status = 'active' AND rm.left_over = 0
            RETURNING a.id
        ),
        ended AS (
            UPDATE sessions s SET revoked_at = now(), revoke_reason = $3::text
            FROM target x
            WHERE s.tenant_id = x.t AND s.account_id = x.account_id AND s.revoked_at IS NULL
                AND (s.identity_id = x.identity_id OR x.account_id IN (SELECT id FROM disabled))
            RETURNING s.account_id
        ),
        deleted AS (
            DELETE FROM identities d USING target x WHERE d.account_id = x.account_id AND d.id = x.identity_id RETURNING d.id
        ),
        remembered AS (
            INSERT INTO consent_revocations (tenant_id, provider, provider_scope, subject, account_id)
            SELECT x.t, 'apple', x.sc, x.u, x.account_id FROM target x
            ON CONFLICT (tenant_id, provider, provider_scope, subject)
                DO UPDATE SET account_id = EXCLUDED.account_id, revoked_at = now()
        ),
        details AS MATERIALIZED (
            SELECT x.n, x.t, x.identity_id, x.account_id, jsonb_strip_nulls(jsonb_build_object(
                'account_id', x.account_id::text, 'identity_id', x.identity_id::text, 'event_time', x.etx,
                'account_disabled', x.account_id IN (SELECT id FROM disabled), 'remaining_identities', rm.left_over)) AS payload
            FROM target x JOIN remaining rm ON rm.n = x.n
        ),
        audited AS (
            INSERT INTO audit_log (tenant_id, actor, action, target, details)
            SELECT w.t, 'apple', w.action, w.target, w.details FROM (
                SELECT d.n, d.t, 'apple.consent_revoked' AS action, d.identity_id::text AS target,
                    d.payload || jsonb_build_object('revoked_sessions', (SELECT count(*) FROM ended e WHERE e.account_id = d.account_id))
                        AS details
                FROM details d
                UNION ALL
                SELECT r.n, r.t, 'apple.notification_unmatched', NULL, jsonb_build_object('type', 'consent-revoked')
                FROM received r WHERE r.identity_id IS NULL
            ) w
            ORDER BY w.n
        ),
        announced AS (
            INSERT INTO events_outbox (tenant_id, account_id, event_type, payload)
            SELECT d.t, d.account_id, e.event_type, e.payload
            FROM details d CROSS JOIN LATERAL (VALUES
                (1, 'apple.consent_revoked', d.payload),
                (2, 'identity.unlinked', jsonb_build_object(
                    'account_id', d.account_id::text, 'identity_id', d.identity_id::text, 'provider', 'apple', 'reason', 'consent-revoked'))
            ) AS e(k, event_type, payload)
            ORDER BY d.n, e.k
        )
        \(unlinkingResults)
        """
}

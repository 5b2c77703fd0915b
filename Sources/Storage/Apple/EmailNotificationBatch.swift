import BrokerCore
import Foundation
import Logging
import PostgresNIO

/// Apple's `email-disabled` / `email-enabled` notifications that arrive together, written in one
/// statement and one commit (decision 0046), as returning sign-ins are (decision 0030): each
/// element's receipt (deduplicated by `jti`), the identity's flag, the audit row and the event,
/// exactly what ``AppleNotificationRepository/applyWithReceipt(_:to:on:)`` writes in seven.
/// The elements travel as one JSON array (one parameter whatever the batch's size).
struct EmailNotificationBatchStatement {
    typealias Element = AppleNotificationElement

    /// The elements, in arrival order; no two with one receipt key `(tenant, jti)` and no two
    /// for one identity (``AppleNotificationElement/rounds(_:)`` sees to both).
    let elements: [Element]

    /// `matched` reads each element's identity by its unique key; `receipt` records every
    /// element once (`applied` when the identity exists, else `unknown_subject`), and only the
    /// elements it recorded go on: a `jti` already received changes nothing.
    static let sql = """
        WITH posted AS MATERIALIZED (
            SELECT * FROM json_to_recordset($1::text::json) AS p(n int, t uuid, j text, ty text, et int8, sc text, u text,
                d bool, en text, etx text)
        ),
        matched AS MATERIALIZED (
            SELECT p.n, i.id AS identity_id
            FROM posted p
            CROSS JOIN LATERAL (
                SELECT id FROM identities
                WHERE tenant_id = p.t AND provider = 'apple' AND provider_scope = p.sc AND subject = p.u
                LIMIT 1) i
        ),
        receipt AS (
            INSERT INTO notification_receipts (tenant_id, jti, event_type, event_time, outcome)
            SELECT p.t, p.j, p.ty, to_timestamp(p.et::float8 / 1000000),
                CASE WHEN m.n IS NULL THEN 'unknown_subject' ELSE 'applied' END
            FROM posted p LEFT JOIN matched m ON m.n = p.n
            ORDER BY p.n
            ON CONFLICT (tenant_id, jti) DO NOTHING
            RETURNING tenant_id, jti
        ),
        received AS MATERIALIZED (
            SELECT p.* FROM posted p JOIN receipt r ON r.tenant_id = p.t AND r.jti = p.j
        ),
        changed AS (
            UPDATE identities i SET relay_email_deliverable = r.d, updated_at = now()
            FROM received r JOIN matched m ON m.n = r.n
            WHERE i.tenant_id = r.t AND i.id = m.identity_id
            RETURNING r.n, r.t, r.en, i.id, i.account_id, jsonb_strip_nulls(jsonb_build_object(
                'account_id', i.account_id::text, 'identity_id', i.id::text, 'event_time', r.etx)) AS details
        ),
        audited AS (
            INSERT INTO audit_log (tenant_id, actor, action, target, details)
            SELECT n.t, 'apple', n.action, n.target, n.details FROM (
                SELECT c.n, c.t, c.en AS action, c.id::text AS target, c.details FROM changed c
                UNION ALL
                SELECT r.n, r.t, 'apple.notification_unmatched', NULL, jsonb_build_object('type', r.ty)
                FROM received r WHERE NOT EXISTS (SELECT 1 FROM changed c WHERE c.n = r.n)
            ) n
            ORDER BY n.n
        ),
        announced AS (
            INSERT INTO events_outbox (tenant_id, account_id, event_type, payload)
            SELECT c.t, c.account_id, c.en, c.details FROM changed c ORDER BY c.n
        )
        SELECT p.n, EXISTS (SELECT 1 FROM received r WHERE r.n = p.n), EXISTS (SELECT 1 FROM changed c WHERE c.n = p.n)
        FROM posted p
        """

    var query: PostgresQuery {
        var bindings = PostgresBindings(capacity: 1)
        bindings.append(json)
        return PostgresQuery(unsafeSQL: Self.sql, binds: bindings)
    }

    /// `[{"n": 0, "t": tenant, "j": jti, …}, …]`.
    var json: String {
        var writer = JSONWriter(capacity: 320 * elements.count)
        writer.beginArray()
        for (n, element) in elements.enumerated() {
            let deliverable = element.event.type == "email-enabled"
            writer.beginObject()
            element.writeCommonMembers(n, into: &writer)
            writer.member("d", deliverable)
            writer.member("en", deliverable ? "apple.email_enabled" : "apple.email_disabled")
            writer.endObject()
        }
        writer.endArray()
        return String(decoding: writer.bytes, as: UTF8.self)
    }
}

typealias EmailNotificationBatch = AppleNotificationElement.Batch

extension EmailNotificationBatchStatement {
    /// Each batch runs on the pool in use when it starts; nil when batching is off.
    static func batcher(pool: DatabasePool, logger: Logger, maxRunning: Int, timeout: Duration) -> EmailNotificationBatch? {
        Element.batcher(pool: pool, logger: logger, maxRunning: maxRunning, timeout: timeout, label: "email notification", write: write)
    }

    /// Writes `elements` in as few statements as their keys allow (one, unless two share a
    /// `jti` or an identity), in arrival order.
    static func write(_ elements: [Element], client: PostgresClient, logger: Logger) async throws
        -> [AppleNotificationRepository.Outcome]
    {
        var outcomes = [AppleNotificationRepository.Outcome](repeating: .duplicate, count: elements.count)
        for round in Element.rounds(elements) {
            let statement = EmailNotificationBatchStatement(elements: round.map { elements[$0] })
            let rows = try await client.rows(statement.query, logger: logger)
            guard rows.count == round.count else { throw BatchMismatch() }
            for row in rows {
                let (n, received, changed) = try row.decode((Int32, Bool, Bool).self)
                guard round.indices.contains(Int(n)) else { throw BatchMismatch() }
                outcomes[round[Int(n)]] = !received ? .duplicate : changed ? .applied : .unknownSubject
            }
        }
        return outcomes
    }
}

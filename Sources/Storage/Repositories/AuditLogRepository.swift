import BrokerCore
import Foundation
import Logging
import PostgresNIO

/// Who did what to which object. Written in the same transaction as the change it records.
public struct AuditLogRepository: Sendable {
    let client: PostgresClient
    let logger: Logger

    public struct Entry: Sendable, Equatable {
        public let actor: String
        public let action: String
        public let target: String?
        public let createdAt: Date
    }

    static func append(
        tenantID: UUID?, actor: String, action: String, target: String?, on connection: PostgresConnection,
        logger: Logger
    ) async throws {
        try await connection.query(
            "INSERT INTO audit_log (tenant_id, actor, action, target) VALUES (\(tenantID), \(actor), \(action), \(target))",
            logger: logger)
    }

    /// The same with details: an object of strings and booleans (`account_id` and
    /// `session_id` members show as the security event's own).
    static func append(
        tenantID: UUID?, actor: String, action: String, target: String?, details: [String: AuditDetail],
        on connection: PostgresConnection, logger: Logger
    ) async throws {
        try await connection.query(
            """
            INSERT INTO audit_log (tenant_id, actor, action, target, details)
            VALUES (\(tenantID), \(actor), \(action), \(target), \(AuditDetail.json(details))::jsonb)
            """,
            logger: logger)
    }

    public func entries(tenantID: UUID) async throws -> [Entry] {
        let rows = try await client.rows(
            "SELECT actor, action, target, created_at FROM audit_log WHERE tenant_id = \(tenantID) ORDER BY id",
            logger: logger)
        var result: [Entry] = []
        for row in rows {
            let (actor, action, target, created) = try row.decode((String, String, String?, Date).self)
            result.append(Entry(actor: actor, action: action, target: target, createdAt: created))
        }
        return result
    }
}

/// Security events: sign-ins, sign-outs and revocations read from the sessions that record
/// them, and audit_log's rows (migration 0007, decision 0020).
extension AuditLogRepository {
    public struct SecurityEvent: Sendable, Equatable {
        public let tenantID: UUID?
        public let occurredAt: Date
        public let action: String
        public let accountID: UUID?
        public let sessionID: UUID?
        public let actor: String
        public let target: String?
        /// The event's details as JSON text.
        public let details: String
    }

    /// Appends one row outside any other transaction (events that change nothing else: a
    /// replayed token, a refused API key). `details` must be a JSON object's text; an
    /// `account_id` or `session_id` member in it is shown as the event's own.
    public func record(tenantID: UUID?, actor: String, action: String, target: String?, details: String) async throws {
        _ = try await client.rows(
            """
            INSERT INTO audit_log (tenant_id, actor, action, target, details)
            VALUES (\(tenantID), \(actor), \(action), \(target), \(details)::jsonb)
            """,
            logger: logger)
    }

    /// The statement of `securityEvents`: only the filters given, each value bound. The broker's
    /// connections plan every statement without its values (decision 0075), so a filter written
    /// as `($1 IS NULL OR tenant_id = $1)` would keep the tenant's index out of every plan.
    static func securityEventsQuery(tenantID: UUID?, accountID: UUID?, action: String?, limit: Int) -> PostgresQuery {
        var bindings = PostgresBindings(capacity: 4)
        var conditions: [String] = []
        if let tenantID {
            bindings.append(tenantID)
            conditions.append("tenant_id = $\(bindings.count)")
        }
        if let accountID {
            bindings.append(accountID)
            conditions.append("account_id = $\(bindings.count)")
        }
        if let action {
            bindings.append(action)
            conditions.append("(action = $\(bindings.count) OR action LIKE $\(bindings.count) || '.%')")
        }
        bindings.append(limit)
        let filter = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
        return PostgresQuery(
            unsafeSQL: """
                SELECT tenant_id, occurred_at, action, account_id, session_id, actor, target, details::text
                FROM security_events
                \(filter)
                ORDER BY occurred_at DESC
                LIMIT $\(bindings.count)
                """, binds: bindings)
    }

    /// The newest events first. `tenantID` nil: every tenant's and those of no tenant (API-key
    /// failures). `accountID` narrows to one account (through the sessions' account index).
    public func securityEvents(tenantID: UUID?, accountID: UUID?, action: String?, limit: Int) async throws -> [SecurityEvent] {
        let rows = try await client.rows(
            Self.securityEventsQuery(tenantID: tenantID, accountID: accountID, action: action, limit: limit), logger: logger)
        var events: [SecurityEvent] = []
        for row in rows {
            let (tenant, at, action, account, session, actor, target, details) = try row.decode(
                (UUID?, Date, String, UUID?, UUID?, String, String?, String).self)
            events.append(
                SecurityEvent(
                    tenantID: tenant, occurredAt: at, action: action, accountID: account, sessionID: session, actor: actor,
                    target: target, details: details))
        }
        return events
    }
}

/// A value in an audit row's details.
public enum AuditDetail: Sendable, Equatable {
    case string(String)
    case bool(Bool)
    case int(Int)
    case strings([String])

    /// The details as a JSON object's text, members in name order.
    public static func json(_ details: [String: AuditDetail]) -> String {
        var writer = JSONWriter(capacity: 128)
        writer.beginObject()
        for (name, value) in details.sorted(by: { $0.key < $1.key }) {
            switch value {
            case .string(let text): writer.member(name, text)
            case .bool(let flag): writer.member(name, flag)
            case .int(let number): writer.member(name, number)
            case .strings(let texts):
                writer.key(name)
                writer.beginArray()
                for text in texts { writer.string(text) }
                writer.endArray()
            }
        }
        writer.endObject()
        return String(decoding: writer.bytes, as: UTF8.self)
    }
}

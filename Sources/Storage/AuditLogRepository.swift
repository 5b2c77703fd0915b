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

    public func entries(tenantID: UUID) async throws -> [Entry] {
        let rows = try await client.query(
            "SELECT actor, action, target, created_at FROM audit_log WHERE tenant_id = \(tenantID) ORDER BY id",
            logger: logger)
        var result: [Entry] = []
        for try await (actor, action, target, created) in rows.decode((String, String, String?, Date).self) {
            result.append(Entry(actor: actor, action: action, target: target, createdAt: created))
        }
        return result
    }
}

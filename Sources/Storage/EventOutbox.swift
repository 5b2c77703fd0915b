import BrokerCore
import Foundation
import Logging
import PostgresNIO

/// The events outbox (issue 23 §5): one row per change a product backend hears of, written in
/// the same transaction as the change, so that an event exists exactly when its change does.
enum EventOutbox {
    /// Appends `type` about `accountID` with `payload` (an object of strings, numbers and
    /// booleans) on the transaction's connection.
    static func append(
        tenantID: UUID, accountID: UUID?, type: String, payload: [String: AuditDetail], on connection: PostgresConnection, logger: Logger
    ) async throws {
        try await connection.query(
            """
            INSERT INTO events_outbox (tenant_id, account_id, event_type, payload)
            VALUES (\(tenantID), \(accountID), \(type), \(AuditDetail.json(payload))::jsonb)
            """,
            logger: logger)
    }
}

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

extension Database {
    public var events: EventRepository { EventRepository(client: client, logger: logger) }
}

/// Reading the tenant's events in commit order (decision 0042): a page after a cursor, over
/// transactions that finished before every transaction still running, so no event can later
/// appear behind a cursor already handed out.
public struct EventRepository: Sendable {
    let client: PostgresClient
    let logger: Logger

    /// Where a reader is: the transaction and the id of the last event it read.
    public struct Cursor: Sendable, Equatable, CustomStringConvertible {
        public let transaction: UInt64
        public let id: Int64

        public static let start = Cursor(transaction: 0, id: 0)

        public init(transaction: UInt64, id: Int64) {
            self.transaction = transaction
            self.id = id
        }

        /// `"<transaction>.<id>"`, both decimal; nil for anything else.
        public init?(_ text: String) {
            let parts = text.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 2,
                parts.allSatisfy({ !$0.isEmpty && $0.count <= 20 && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
                let transaction = UInt64(parts[0]), let id = Int64(parts[1])
            else { return nil }
            self.init(transaction: transaction, id: id)
        }

        public var description: String { "\(transaction).\(id)" }
    }

    public struct Event: Sendable, Equatable {
        public let id: Int64
        public let cursor: Cursor
        public let type: String
        public let accountID: UUID?
        public let occurredAt: Date
        /// The event's data: a JSON object's text.
        public let data: String
    }

    /// Up to `limit` events of the tenant after `cursor`, oldest first. The order is the
    /// numeric `(tx, id)` of the table's columns, qualified: a bare `ORDER BY tx` would bind to
    /// the output column `tx::text` and sort `10000` before `9999` (issue 39 A1).
    public func page(tenantID: UUID, after cursor: Cursor, limit: Int) async throws -> [Event] {
        let rows = try await client.rows(
            """
            SELECT e.id, e.tx::text AS tx_text, e.event_type, e.account_id, e.created_at, e.payload::text FROM events_outbox e
            WHERE e.tenant_id = \(tenantID) AND (e.tx, e.id) > (\(String(cursor.transaction))::xid8, \(cursor.id))
                AND e.tx < pg_snapshot_xmin(pg_current_snapshot())
            ORDER BY e.tx, e.id LIMIT \(limit)
            """, logger: logger)
        return try rows.map { row in
            let (id, tx, type, accountID, createdAt, data) = try row.decode((Int64, String, String, UUID?, Date, String).self)
            return Event(
                id: id, cursor: Cursor(transaction: UInt64(tx) ?? 0, id: id), type: type, accountID: accountID, occurredAt: createdAt,
                data: data)
        }
    }
}

import BrokerCore
import Foundation
import Logging
import PostgresNIO

extension Database {
    public var retention: RetentionSweep { RetentionSweep(client: client, logger: logger) }
}

/// Deletes the lifecycle records whose job is over once they are older than the retention
/// period (decision 0044): Apple notification receipts (the `jti` dedupe; Apple redelivers
/// within days, not weeks), revocations Apple took, and webhook deliveries the backend took.
/// Pending and failed work is never swept. Each pass deletes at most `batch` rows a table, so
/// no statement holds locks for long.
public struct RetentionSweep: Sendable {
    let client: PostgresClient
    let logger: Logger

    /// How long finished records are kept.
    public static let period: TimeInterval = 30 * 86_400

    /// Rows deleted per table.
    public struct Swept: Sendable, Equatable {
        public var receipts = 0
        public var revocations = 0
        public var deliveries = 0

        public init(receipts: Int = 0, revocations: Int = 0, deliveries: Int = 0) {
            self.receipts = receipts
            self.revocations = revocations
            self.deliveries = deliveries
        }
    }

    public func sweep(olderThan cutoff: Date, batch: Int = 10_000) async throws -> Swept {
        var swept = Swept()
        swept.receipts = try await client.rows(
            """
            DELETE FROM notification_receipts WHERE (tenant_id, jti) IN (
                SELECT tenant_id, jti FROM notification_receipts WHERE received_at < \(cutoff) LIMIT \(batch))
            RETURNING 1
            """, logger: logger
        ).count
        swept.revocations = try await client.rows(
            """
            DELETE FROM apple_revocations WHERE id IN (
                SELECT id FROM apple_revocations WHERE status = 'done' AND done_at < \(cutoff) LIMIT \(batch))
            RETURNING 1
            """, logger: logger
        ).count
        swept.deliveries = try await client.rows(
            """
            DELETE FROM webhook_deliveries WHERE event_id IN (
                SELECT event_id FROM webhook_deliveries WHERE status = 'delivered' AND delivered_at < \(cutoff) LIMIT \(batch))
            RETURNING 1
            """, logger: logger
        ).count
        return swept
    }
}

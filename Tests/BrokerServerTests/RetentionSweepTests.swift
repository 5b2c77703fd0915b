import BrokerCore
import Foundation
import PostgresNIO
import Storage
import Testing

/// Finished lifecycle records go after the retention period; pending and failed work stays.
@Suite struct RetentionSweepTests {
    @Test func finishedRecordsPastThePeriodGoAndEverythingElseStays() async throws {
        try await AppleTestSetup.run { setup in
            let database = setup.app.database
            let tenant = setup.tenant.id
            let old = Date().addingTimeInterval(-RetentionSweep.period - 3_600)
            try await database.client.query(
                """
                INSERT INTO notification_receipts (tenant_id, jti, event_type, received_at, outcome) VALUES
                    (\(tenant), 'old', 'email-disabled', \(old), 'applied'), (\(tenant), 'new', 'email-disabled', now(), 'applied')
                """)
            for (status, doneAt) in [("done", old), ("done", Date()), ("failed", old), ("pending", old)] {
                let sealed: Data? = status == "done" ? nil : Data([1])
                try await database.client.query(
                    """
                    INSERT INTO apple_revocations (id, tenant_id, account_id, team_id, client_id, token_sealed, status, done_at, created_at)
                    VALUES (\(UUID()), \(tenant), \(UUID()), 'TEAM000001', 'com.acme.app', \(sealed), \(status), \(doneAt), \(old))
                    """)
            }
            for (status, deliveredAt) in [("delivered", old), ("delivered", Date()), ("failed", old), ("pending", old)] {
                try await database.client.query(
                    """
                    WITH e AS (INSERT INTO events_outbox (tenant_id, event_type, payload) VALUES (\(tenant), 'account.created', '{}')
                        RETURNING id, tx)
                    INSERT INTO webhook_deliveries (event_id, tenant_id, event_tx, status, delivered_at, created_at)
                    SELECT id, \(tenant), tx, \(status), \(deliveredAt), \(old) FROM e
                    """)
            }
            // The application's own sweep runs once at its start, concurrently with this test:
            // it may have taken some of the expired rows already. Between the two, each went once.
            let swept = try await database.retention.sweep(olderThan: Date().addingTimeInterval(-RetentionSweep.period))
            #expect(swept.receipts <= 1 && swept.revocations <= 1 && swept.deliveries <= 1, "\(swept)")
            let again = try await database.retention.sweep(olderThan: Date().addingTimeInterval(-RetentionSweep.period))
            #expect(again == RetentionSweep.Swept())
            let left = try await database.client.query(
                """
                SELECT (SELECT count(*) FROM notification_receipts), (SELECT count(*) FROM apple_revocations),
                    (SELECT count(*) FROM webhook_deliveries)
                """
            ).collect().first?.decode((Int, Int, Int).self)
            #expect(left?.0 == 1 && left?.1 == 3 && left?.2 == 3)
        }
    }
}

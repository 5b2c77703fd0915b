import BrokerCore
import Foundation
import PostgresNIO
import TestSupport
import Testing

@testable import Storage

/// The webhook worker's take reads the due deliveries from the start of their index and stops
/// at the first it may send, however long the backlog (decision 0089). On the broker's
/// connections (`plan_cache_mode = force_generic_plan`) the statement's generic plan read every
/// due delivery and sorted them all to keep one: 128 ms a take at 10,000 pending in the soak
/// of issue 43, so that a backlog never drained. The take is explained here as the repository
/// sends it (its transaction, its `SET LOCAL`, its statement), on the role `broker serve`
/// runs as, before and after statistics exist.
@Suite struct WebhookTakePlanTests {
    @Test func aTakeReadsTheFirstDueDeliveriesNotTheWholeBacklog() async throws {
        try await TestDatabase.withFreshServing { admin, serving, _ in
            let tenant = try await TestDatabase.createTenant("take-plan", in: admin)
            _ = try await admin.webhooks.set(
                tenantID: tenant.id, url: "https://hooks.example.com/events", eventTypes: nil,
                sealedSecret: Data(repeating: 7, count: 32), actor: "test")
            // 3,000 events of as many accounts, dispatched into 3,000 pending deliveries.
            try await admin.client.query(
                """
                INSERT INTO events_outbox (tenant_id, account_id, event_type, payload)
                SELECT \(tenant.id), gen_random_uuid(), 'account.created', '{}'::jsonb FROM generate_series(1, 3000)
                """, logger: TestDatabase.logger)
            // Dispatch reads events committed before every transaction still running in the
            // cluster: other suites' transactions hold it back for a moment.
            var dispatched = 0
            let giveUp = ContinuousClock.now + .seconds(30)
            while dispatched < 3_000, ContinuousClock.now < giveUp {
                dispatched += try await admin.webhooks.dispatch(limit: 5_000)
                await Task.yield()
            }
            try #require(dispatched == 3_000)

            for analyzed in [false, true] {
                if analyzed { try await admin.client.query("ANALYZE", logger: TestDatabase.logger) }
                let (plan, statement) = WebhookRepository.take(now: Date(), leaseUntil: Date().addingTimeInterval(60), excluding: [])
                let lines = try await TenantScope.acrossTenants(because: "the webhook worker takes any tenant's delivery") {
                    try await serving.client.transaction(logger: TestDatabase.logger) { connection in
                        _ = try await connection.query(plan, logger: TestDatabase.logger).collect()
                        let explained = PostgresQuery(
                            unsafeSQL: "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + statement.sql, binds: statement.binds)
                        return try await connection.query(explained, logger: TestDatabase.logger).collect().map {
                            try $0.decode(String.self)
                        }
                    }
                }
                let plainly = lines.joined(separator: "\n")
                // The scan of the candidates (`p`): how many due deliveries it handed on.
                let scanned = lines.filter { $0.contains("on webhook_deliveries p ") }.compactMap { line -> Int? in
                    guard let range = line.range(of: #"rows=\d+"#, options: .regularExpression) else { return nil }
                    return Int(line[range].dropFirst("rows=".count))
                }
                #expect(!scanned.isEmpty, "analyzed \(analyzed): no scan of the candidates in\n\(plainly)")
                #expect(scanned.allSatisfy { $0 <= 10 }, "analyzed \(analyzed): read \(scanned) due deliveries to take one\n\(plainly)")
                #expect(!lines.contains { $0.contains("Sort") }, "analyzed \(analyzed): sorted the backlog\n\(plainly)")
                #expect(lines.contains { $0.contains("Update on webhook_deliveries d") && $0.contains("rows=1") }, "\(plainly)")
            }
        }
    }
}

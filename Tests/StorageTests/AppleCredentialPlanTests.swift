import BrokerCore
import Foundation
import PostgresNIO
import TestSupport
import Testing

@testable import Storage

/// The Apple credential checks find their tokens through `identities_credential_check_idx`
/// (decision 0093), whose predicate names `holds_provider_refresh_token`: a query reaches a
/// partial index only when its own conditions imply the predicate, so the worker's statements
/// name that column too. Explained with the values the worker sends, on the role `broker serve`
/// runs as, among many Apple identities that hold no token, before and after statistics exist:
/// neither reads its candidates from the table whole.
@Suite struct AppleCredentialPlanTests {
    @Test func theWorkersStatementsReadTheTokensThroughTheirIndex() async throws {
        try await TestDatabase.withFreshServing { admin, serving, _ in
            let tenant = try await TestDatabase.createTenant("credential-plan", in: admin)
            // 5,000 Apple identities, one in fifty holding a token; half of those already due.
            try await admin.client.query(
                """
                WITH people AS (
                    INSERT INTO accounts (id, tenant_id)
                    SELECT gen_random_uuid(), \(tenant.id) FROM generate_series(1, 5000)
                    RETURNING id
                )
                INSERT INTO identities (id, tenant_id, account_id, provider, provider_scope, subject,
                    provider_refresh_token_sealed, provider_token_client_id, credential_check_due_at)
                SELECT gen_random_uuid(), \(tenant.id), id, 'apple', 'TEAM000001', id::text,
                    CASE WHEN n % 50 = 0 THEN '\\x01'::bytea END, CASE WHEN n % 50 = 0 THEN 'com.acme.app' END,
                    CASE WHEN n % 100 = 0 THEN now() - interval '1 minute' END
                FROM (SELECT id, row_number() OVER () AS n FROM people) p
                """, logger: TestDatabase.logger)
            for analyzed in [false, true] {
                if analyzed { try await admin.client.query("ANALYZE identities", logger: TestDatabase.logger) }
                // The worker's, across tenants (`broker apple check-credentials --tenant` runs them
                // for one tenant, and may read that tenant's Apple identities instead).
                let statements: [(what: String, alias: String, PostgresQuery)] = [
                    ("schedule", "i", AppleCredentialRepository.scheduling(tenantID: nil, interval: 86_400, limit: 1_000)),
                    ("take", "d", AppleCredentialRepository.taking(tenantID: nil, dueBy: Date())),
                ]
                for (what, alias, statement) in statements {
                    var lines: [String] = []
                    do {
                        try await TenantScope.acrossTenants(because: "the credential checks read every tenant's tokens") {
                            try await serving.client.transaction(logger: TestDatabase.logger) { connection -> Void in
                                let explained = PostgresQuery(
                                    unsafeSQL: "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + statement.sql, binds: statement.binds)
                                let plan = try await connection.query(explained, logger: TestDatabase.logger).collect().map {
                                    try $0.decode(String.self)
                                }
                                // Explained with ANALYZE, the statement ran: its transaction is undone.
                                throw Explained(lines: plan)
                            }
                        }
                    } catch let error as PostgresTransactionError {
                        lines = try #require(error.closureError as? Explained, "\(error)").lines
                    }
                    let plainly = lines.joined(separator: "\n")
                    // The candidates are read through the index (a plain or a bitmap scan); the
                    // rows taken are then updated by their ids, however the planner joins them.
                    #expect(
                        lines.contains { $0.contains("identities_credential_check_idx") },
                        "\(what), analyzed \(analyzed):\n\(plainly)")
                    #expect(
                        !lines.contains { $0.contains("Seq Scan on identities \(alias)") }, "\(what), analyzed \(analyzed):\n\(plainly)")
                }
            }
        }
    }

    /// Carries an explained plan out of a transaction that is rolled back.
    struct Explained: Error { let lines: [String] }
}

import BrokerCore
import Foundation
import PostgresNIO
import TestSupport
import Testing

@testable import Storage

/// The hot statements are prepared once per connection so that PostgreSQL only binds and runs
/// them (decision 0006), on the generic plan that reaches every row through keys bound to values
/// (decision 0014, asserted by HotStatementPlanTests). Under PostgreSQL's default
/// `plan_cache_mode = auto` a prepared statement is planned again for its values whenever the
/// generic plan's estimate exceeds the average of the custom plans seen so far: in issue 40's
/// benchmarks, after an autovacuum `ANALYZE`, the sign-in statements were planned on every
/// execution in two runs of three (PostgreSQL's CPU a returning sign-in 190–208 µs against 94).
/// The broker's connections force the generic plan (decision 0075). Here every hot prepared
/// statement runs many times on one connection, on fresh tables and on loaded, analyzed ones,
/// as the superuser and as `broker serve`'s role, and PostgreSQL's own count
/// (`pg_prepared_statements.custom_plans`) says it never planned one for its values.
@Suite struct GenericPlanUseTests {
    let quiet = SignInFixtures()

    /// The statements this process prepared on the pool's one connection, with their plan counts.
    func planCounts(_ database: Database) async throws -> [String: (generic: Int, custom: Int)] {
        var counts: [String: (generic: Int, custom: Int)] = [:]
        let rows = try await database.client.query("SELECT name, generic_plans, custom_plans FROM pg_prepared_statements")
        for try await (name, generic, custom) in rows.decode((String, Int, Int).self) { counts[name] = (generic, custom) }
        return counts
    }

    /// Sign-ins of every lean kind and refreshes, `rounds` times each, on `database`.
    func exercise(_ tenantID: UUID, rounds: Int, prefix: String, _ database: Database) async throws {
        let sessions = database.sessions
        for round in 0..<rounds {
            // A first sign-in (the first batch), then a quiet one (the quiet batch), then one
            // with a new email and one with a provider refresh token (the known batch, decision
            // 0091), then a sign-in-only intent of a person never seen (the full statement, which
            // finds nothing and writes nothing), then a refresh of the first session.
            let subject = "\(prefix).\(round)"
            var first = quiet.request(tenantID: tenantID, subject: subject)
            let token = RefreshToken.generate(sessionID: first.session.id)
            first.session.refreshTokenHash = Data(token.hash)
            let opened = try #require(try await database.accounts.signIn(first))
            _ = try #require(try await database.accounts.signIn(quiet.request(tenantID: tenantID, subject: subject)))
            _ = try #require(
                try await database.accounts.signIn(quiet.request(tenantID: tenantID, subject: subject, email: "new.\(round)@example.com")))
            var withToken = quiet.request(tenantID: tenantID, subject: subject)
            withToken.sealedProviderRefreshToken = Data([1, 2, 3])
            _ = try #require(try await database.accounts.signIn(withToken))
            var stranger = quiet.request(tenantID: tenantID, subject: "\(subject).never-seen")
            stranger.intent = .signIn
            #expect(try await database.accounts.signIn(stranger) == nil)
            let outcome = try await sessions.refresh(
                tenantID: tenantID, tokenHash: Data(token.hash), sessionID: opened.sessionID,
                successorHash: Data(RefreshToken.generate(sessionID: opened.sessionID).hash), idleLifetime: 600, reuseInterval: 10)
            guard case .rotated = outcome else {
                Issue.record("refresh \(round): \(outcome)")
                return
            }
        }
    }

    /// The statements that must run on their generic plan once warmed up.
    static let hot = [
        AccountRepository.QuietSignInBatchStatement.name, AccountRepository.FirstSignInBatchStatement.name,
        AccountRepository.KnownSignInBatchStatement.name, AccountRepository.SignInStatement.name,
        SessionRepository.RotateStatement.name, CommitConfirmation.name,
    ]

    /// As the superuser (no row-level security) and as `broker serve`'s role, to which the
    /// tenant wall applies (decision 0055), with its scope set per connection or per transaction.
    enum Role: String, CaseIterable, Sendable {
        case superuser
        case serving
        case servingPerTransaction
    }

    @Test(arguments: Role.allCases) func everyHotStatementRunsOnItsGenericPlanOnceWarm(_ role: Role) async throws {
        let (_, _, configuration) = try await TestDatabase.create()
        let admin = try Database(configuration: configuration, logger: TestDatabase.logger)
        var served = configuration
        served.maxConnections = 1
        if role != .superuser { served.username = Migrator.serveRole }
        served.tenantScopePerTransaction = role == .servingPerTransaction
        let database = try Database(configuration: served, logger: TestDatabase.logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await admin.run() }
            group.addTask { await database.run() }
            defer { group.cancelAll() }
            try await admin.migrator().migrate()
            let tenant = try await TestDatabase.createTenant("plans", in: admin)
            try await TenantScope.tenant(tenant.id) {
                // Fresh tables, as after `broker db migrate`.
                try await exercise(tenant.id, rounds: 12, prefix: "fresh", database)
                let fresh = try await planCounts(database)
                // Loaded and analyzed, as autovacuum leaves them during a busy hour: the generic plans
                // are made again for tables of another size, while the custom plans' average cost
                // PostgreSQL keeps is still that of the empty tables.
                try await SignInFixtures.loadUnanalyzed(admin, tenant: tenant, accounts: 30_000)
                _ = try await admin.client.query("ANALYZE")
                try await exercise(tenant.id, rounds: 12, prefix: "loaded", database)
                let loaded = try await planCounts(database)
                // Per transaction, the `COMMIT` confirms a write and the confirmation never runs.
                for name in Self.hot where !(role == .servingPerTransaction && name == CommitConfirmation.name) {
                    let before = try #require(fresh[name], "\(name) was not prepared: \(fresh.keys.sorted())")
                    let after = try #require(loaded[name])
                    // Under `auto`, PostgreSQL plans at least the first five executions for their
                    // values; the broker's connections take the generic plan from the first.
                    #expect(before.custom == 0, "\(name) on fresh tables: \(before.custom) custom plans, \(before.generic) generic")
                    #expect(before.generic >= 12, "\(name) ran \(before.generic) times on fresh tables")
                    #expect(
                        after.custom == before.custom,
                        "\(name) on loaded tables: \(after.custom - before.custom) more custom plans, \(after.generic - before.generic) generic"
                    )
                }
            }
        }
    }
}

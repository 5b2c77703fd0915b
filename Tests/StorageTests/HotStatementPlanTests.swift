import BrokerCore
import Foundation
import PostgresNIO
import TestSupport
import Testing

@testable import Storage

/// Every statement on a request path reaches its rows through keys bound to values, whatever
/// the statistics say (decision 0014): the generic plan of each, on the broker's own connection
/// settings, on empty analyzed tables (as `broker db migrate` leaves them), on loaded tables
/// never analyzed, and on loaded analyzed ones. A generic plan is what a prepared statement
/// keeps for the life of its connection.
@Suite struct HotStatementPlanTests {
    /// A statement as the repositories send it: its SQL and how many parameters it takes.
    struct Statement: Sendable, CustomStringConvertible {
        let name: String
        let sql: String
        let parameters: Int
        /// Index columns a statement may leave unbound (a trailing ORDER BY column read with LIMIT 1).
        var unboundAllowed: [String: Set<String>] = [:]
        var description: String { name }

        init(_ name: String, sql: String, parameters: Int, unboundAllowed: [String: Set<String>] = [:]) {
            self.name = name
            self.sql = sql
            self.parameters = parameters
            self.unboundAllowed = unboundAllowed
        }

        init(_ name: String, _ query: PostgresQuery, unboundAllowed: [String: Set<String>] = [:]) {
            self.init(name, sql: query.sql, parameters: query.binds.count, unboundAllowed: unboundAllowed)
        }
    }

    static func statements() throws -> [Statement] {
        let tenant = UUID()
        let id = UUID()
        let hash = Data(repeating: 1, count: 32)
        let identity = ProviderIdentity(
            provider: .google, providerScope: "", subject: "s", email: "a@example.com", emailVerified: true, isPrivateEmail: false,
            name: PersonName(givenName: nil, familyName: nil))
        // The session cap reads an account's open sessions through the leading column of its
        // sessions index.
        let sessionCap: [String: Set<String>] = ["sessions_account_identity_idx": ["identity_id", "created_at"]]
        return [
            Statement(
                "sign-in", sql: AccountRepository.SignInStatement.sql, parameters: 1,
                unboundAllowed: sessionCap),
            Statement(
                "quiet sign-in, alone or in a batch", sql: AccountRepository.QuietSignInBatchStatement.sql, parameters: 1,
                unboundAllowed: sessionCap),
            Statement(
                "first sign-in, alone or in a batch", sql: AccountRepository.FirstSignInBatchStatement.sql, parameters: 1,
                unboundAllowed: sessionCap),
            // The same with a relying party's code kept in its commit (decision 0100): the web
            // sign-in's state read through its key.
            Statement(
                "quiet sign-in keeping a code", sql: AccountRepository.QuietCodeKeepingBatchStatement.sql, parameters: 1,
                unboundAllowed: sessionCap),
            Statement(
                "first sign-in keeping a code", sql: AccountRepository.FirstCodeKeepingBatchStatement.sql, parameters: 1,
                unboundAllowed: sessionCap),
            Statement(
                "known identity's sign-in keeping a code", sql: AccountRepository.KnownCodeKeepingBatchStatement.sql, parameters: 1,
                unboundAllowed: sessionCap),
            Statement(
                "known identity's sign-in, alone or in a batch", sql: AccountRepository.KnownSignInBatchStatement.sql, parameters: 1,
                unboundAllowed: sessionCap),
            Statement("refresh rotation, alone or in a batch", sql: SessionRepository.RotateStatement.sql, parameters: 1),
            Statement("refresh rotation of a token issued before 0010", sql: SessionRepository.LegacyRotateStatement.sql, parameters: 1),
            Statement(
                "repeated refresh",
                try SessionRepository.repeatedRotationQuery(
                    tenantID: tenant, tokenHash: hash, successorHash: hash, reuseInterval: 10)),
            Statement(
                "refresh reuse revocation",
                try SessionRepository.reuseRevocationQuery(tenantID: tenant, tokenHash: hash, reuseInterval: 10)),
            Statement(
                "introspect refresh token",
                try SessionRepository.introspectRefreshTokenQuery(tenantID: tenant, tokenHash: hash, sessionID: id)),
            Statement(
                "introspect refresh token issued before 0010",
                try SessionRepository.introspectRefreshTokenQuery(tenantID: tenant, tokenHash: hash, sessionID: nil)),
            Statement("live session", SessionRepository.liveSessionQuery(tenantID: tenant, sessionID: id)),
            Statement(
                "revoke by refresh token",
                try SessionRepository.revokeByRefreshTokenQuery(tenantID: tenant, tokenHash: hash, sessionID: id, reason: "revoked")),
            Statement(
                "revoke by refresh token issued before 0010",
                try SessionRepository.revokeByRefreshTokenQuery(tenantID: tenant, tokenHash: hash, sessionID: nil, reason: "revoked")),
            Statement("revoke session", SessionRepository.revokeQuery(tenantID: tenant, sessionID: id, reason: "revoked")),
            Statement(
                "sign out", SessionRepository.revokeAllQuery(tenantID: tenant, accountID: id, reason: "signed_out"),
                unboundAllowed: sessionCap),
            // An account read lists the account's identities: through the leading column of their
            // account index.
            Statement(
                "account read", AccountRepository.findQuery(tenantID: tenant, accountID: id),
                unboundAllowed: ["sessions_account_identity_idx": ["created_at"], "identities_account_id_idx": ["id"]]),
            Statement("API key", try APIKeyRepository.authenticateQuery(hash: hash)),
            // The client's team may be found among the tenant's teams (a tenant has a few Apple
            // developer teams; the statement runs behind the Apple clients' cache).
            Statement(
                "Apple client", AppleRepository.resolveQuery(tenantID: tenant, clientID: "com.acme.app"),
                unboundAllowed: ["apple_teams_tenant_id_team_id_key": ["team_id"]]),
            Statement("provider settings", ProviderConfigRepository.findQuery(tenantID: tenant, provider: .google)),
            Statement(
                "link",
                try IdentityLinkRepository.insertQuery(tenantID: tenant, accountID: id, identity: identity, sealedProviderRefreshToken: nil)
            ),
            Statement("identity owner", IdentityLinkRepository.ownerQuery(tenantID: tenant, identity: identity)),
            Statement(
                "link proof spent",
                IdentityLinkRepository.spendQuery(
                    .init(sessionID: id, clientID: "c", expiresAt: Date()), tenantID: tenant, accountID: id, provider: "google")),
            Statement("account status lock", AccountStatusRepository.lockQuery(tenantID: tenant, accountID: id)),
            Statement("account status change", AccountStatusRepository.updateQuery(tenantID: tenant, accountID: id, .disabled)),
            Statement(
                "account status sessions", AccountStatusRepository.revokeQuery(tenantID: tenant, accountID: id),
                unboundAllowed: sessionCap),
            // Apple's notifications, alone or in a batch: an account's identities and open
            // sessions through the leading column of their account indexes.
            Statement("email notifications", sql: EmailNotificationBatchStatement.sql, parameters: 1),
            Statement(
                "consent revocations", sql: ConsentRevocationStatement.sql, parameters: 3,
                unboundAllowed: sessionCap.merging(["identities_account_id_idx": ["id"]]) { $1 }),
            Statement(
                "account-delete notifications", sql: AccountDeleteNotificationStatement.sql, parameters: 4,
                unboundAllowed: sessionCap.merging(["identities_account_id_idx": ["id"]]) { $1 }),
            // A web sign-in's callback and a relying party's code exchange.
            Statement("web sign-in state claimed", sql: WebSignInRepository.ClaimStateStatement.sql, parameters: 4),
            Statement("sealed web sign-in states claimed", sql: WebSignInRepository.ClaimSealedStatesStatement.sql, parameters: 2),
            Statement("web sign-in state taken", sql: WebSignInRepository.TakeStateStatement.sql, parameters: 6),
            Statement("authorization code redeemed", sql: WebSignInRepository.RedeemCodeStatement.sql, parameters: 4),
        ]
    }

    /// What is wrong with a plan: each table read that is not an index scan binding every
    /// column of its index.
    static func violations(
        in plan: [String: Any], statement: Statement, indexColumns: [String: [String]], ignoring ignored: Set<String>
    ) -> [String] {
        var found: [String] = []
        let type = plan["Node Type"] as? String ?? "?"
        if let relation = plan["Relation Name"] as? String, type != "ModifyTable", !ignored.contains(relation) {
            switch type {
            case "Index Scan", "Index Only Scan":
                let index = plan["Index Name"] as? String ?? "?"
                let condition = plan["Index Cond"] as? String ?? ""
                let allowed = statement.unboundAllowed[index] ?? []
                let unbound = (indexColumns[index] ?? []).filter { !allowed.contains($0) && !binds(condition, $0) }
                if !unbound.isEmpty || condition.isEmpty {
                    found.append("\(type) of \(relation) through \(index) leaves \(unbound) unbound (cond: \(condition))")
                }
            case "Bitmap Heap Scan":
                break  // its Bitmap Index Scan child is checked
            default:
                found.append("\(type) of \(relation)")
            }
        }
        if type == "Bitmap Index Scan" {
            let index = plan["Index Name"] as? String ?? "?"
            let condition = plan["Index Cond"] as? String ?? ""
            let allowed = statement.unboundAllowed[index] ?? []
            let unbound = (indexColumns[index] ?? []).filter { !allowed.contains($0) && !binds(condition, $0) }
            if !unbound.isEmpty { found.append("Bitmap Index Scan through \(index) leaves \(unbound) unbound") }
        }
        for child in plan["Plans"] as? [[String: Any]] ?? [] {
            found += violations(in: child, statement: statement, indexColumns: indexColumns, ignoring: ignored)
        }
        return found
    }

    /// Whether an index condition as `EXPLAIN` prints it binds `column` to a value: the column,
    /// as a whole name, on the left of `=` (PostgreSQL writes the index's column on the left).
    /// `tenant_id = $1` binds `tenant_id`, not `id`: a match of the text `id = ` took it for both,
    /// and so passed plans that read every account of a tenant (decision 0014).
    static func binds(_ condition: String, _ column: String) -> Bool {
        condition.range(of: "(^|[^A-Za-z0-9_.\"])\(column) = ", options: .regularExpression) != nil
    }

    @Test func aConditionBindsTheColumnItNamesAndNoColumnWhoseNameEndsTheSame() {
        #expect(Self.binds("(tenant_id = p.tenant_id)", "tenant_id"))
        #expect(!Self.binds("(tenant_id = p.tenant_id)", "id"))
        #expect(Self.binds("((tenant_id = s.tenant_id) AND (id = $11))", "id"))
        #expect(Self.binds("(id = ANY ($32))", "id"))
        #expect(Self.binds("id = $1", "id"))
        #expect(!Self.binds("(identity_id = $1)", "id"))
        #expect(!Self.binds("(expires_at > $1)", "expires_at"))
        #expect(!Self.binds("(p.id = x)", "id"))
    }

    /// The plain columns of every index of the schema (expression columns left out).
    static func indexColumns(_ connection: PostgresConnection) async throws -> [String: [String]] {
        let rows = try await connection.query(
            """
            SELECT c.relname::text, a.attname::text
            FROM pg_index i
            JOIN pg_class c ON c.oid = i.indexrelid
            JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
            JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey) AND a.attnum > 0
            """, logger: TestDatabase.logger)
        var columns: [String: [String]] = [:]
        for try await (index, column) in rows.decode((String, String).self) { columns[index, default: []].append(column) }
        return columns
    }

    /// The plan of `statement` as `EXPLAIN (FORMAT JSON)` gives it, prepared on `connection`
    /// and executed with every parameter NULL (generic when `plan_cache_mode` says so).
    static func genericPlan(_ statement: Statement, _ connection: PostgresConnection) async throws -> [String: Any] {
        try await connection.query(PostgresQuery(unsafeSQL: "PREPARE hot_statement AS \(statement.sql)"), logger: TestDatabase.logger)
        let arguments = Array(repeating: "NULL", count: statement.parameters).joined(separator: ", ")
        let rows = try await connection.query(
            PostgresQuery(unsafeSQL: "EXPLAIN (FORMAT JSON) EXECUTE hot_statement(\(arguments))"), logger: TestDatabase.logger)
        var text = ""
        for try await line in rows.decode(String.self) { text += line }
        try await connection.query("DEALLOCATE hot_statement", logger: TestDatabase.logger)
        let json = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]]
        return try #require(json?.first?["Plan"] as? [String: Any])
    }

    /// The generic plan of every statement on one of the broker's own connections; the
    /// violations found, by statement.
    static func genericPlanViolations(_ database: Database, ignoring ignored: Set<String> = []) async throws -> [String: [String]] {
        let statements = try statements()
        return try await database.client.withConnection { connection in
            let columns = try await indexColumns(connection)
            try await connection.query("SET plan_cache_mode = force_generic_plan", logger: TestDatabase.logger)
            var result: [String: [String]] = [:]
            for statement in statements {
                let plan = try await genericPlan(statement, connection)
                result[statement.name] = violations(in: plan, statement: statement, indexColumns: columns, ignoring: ignored)
            }
            try await connection.query("RESET plan_cache_mode", logger: TestDatabase.logger)
            return result
        }
    }

    /// The sign-in statements' generic plans, as the server's defaults would run them: the
    /// estimated cost of each stays below `jit_above_cost`, so that a connection whose `jit`
    /// setting is lost (a pooler that drops startup parameters) does not compile them. The
    /// full statement, taking its one element for 100 rows, was estimated at 1.7 billion and
    /// spent 2.7 s compiling (decision 0072).
    @Test func noSignInStatementIsCostedForJIT() async throws {
        try await TestDatabase.withFresh { database, _ in
            let names = ["sign-in", "quiet sign-in", "first sign-in", "known identity's sign-in"]
            for statement in try Self.statements() where names.contains(where: statement.name.hasPrefix) {
                let cost = try await database.client.withConnection { connection in
                    try await connection.query("SET plan_cache_mode = force_generic_plan", logger: TestDatabase.logger)
                    let plan = try await Self.genericPlan(statement, connection)
                    try await connection.query("RESET plan_cache_mode", logger: TestDatabase.logger)
                    return try #require(plan["Total Cost"] as? Double)
                }
                #expect(cost < 100_000, "\(statement.name): estimated cost \(cost)")
            }
        }
    }

    /// The roles the plans are made as: the superuser, and the role `broker serve` runs as, to
    /// which the tenant wall's policies add their conditions (and so change what each path is
    /// estimated to cost).
    static func roles(_ admin: Database, _ serving: Database) -> [(name: String, database: Database)] {
        [("superuser", admin), ("broker_serve", serving)]
    }

    @Test func everyHotStatementUsesItsKeysOnEmptyTablesAsMigrateLeavesThem() async throws {
        try await TestDatabase.withFreshServing { admin, serving, _ in
            _ = try await TestDatabase.createTenant("plans", in: admin)
            for (role, database) in Self.roles(admin, serving) {
                let violations = try await Self.genericPlanViolations(database)
                for (statement, found) in violations.sorted(by: { $0.key < $1.key }) {
                    #expect(found.isEmpty, "as \(role), \(statement): \(found)")
                }
                #expect(violations.count == (try Self.statements()).count)
            }
        }
    }

    @Test func everyHotStatementUsesItsKeysOnLoadedTablesNeverAnalyzedAndAnalyzed() async throws {
        try await TestDatabase.withFreshServing { admin, serving, _ in
            let tenant = try await TestDatabase.createTenant("plans", in: admin)
            try await SignInFixtures.loadUnanalyzed(admin, tenant: tenant, accounts: 3_000)
            for (role, database) in Self.roles(admin, serving) {
                let stale = try await Self.genericPlanViolations(database)
                for (statement, found) in stale.sorted(by: { $0.key < $1.key }) {
                    #expect(found.isEmpty, "unanalyzed, as \(role), \(statement): \(found)")
                }
            }
            try await admin.client.query("ANALYZE", logger: TestDatabase.logger)
            // Analyzed with one tenant, one key and no Apple, provider, consent-revocation or web
            // sign-in rows, a sequential scan of their one page is the right plan for those
            // tables; the loaded ones must still be keyed.
            for (role, database) in Self.roles(admin, serving) {
                let analyzed = try await Self.genericPlanViolations(
                    database,
                    ignoring: [
                        "tenants", "api_keys", "apple_clients", "apple_app_groups", "apple_teams", "provider_configs",
                        "consent_revocations", "web_sign_in_states", "web_sign_in_codes",
                    ])
                for (statement, found) in analyzed.sorted(by: { $0.key < $1.key }) {
                    #expect(found.isEmpty, "analyzed, as \(role), \(statement): \(found)")
                }
            }
        }
    }

    @Test func migrateAnalyzesTheTablesThatHoldRowsAndLeavesEmptyOnesUnanalyzed() async throws {
        try await TestDatabase.withFresh { database, _ in
            // A fresh database: the migration ledger holds rows, the tables of the product none.
            #expect(try await Self.analyzed("schema_migrations", database))
            #expect(try await !Self.analyzed("accounts", database))
            #expect(try await !Self.analyzed("identities", database))
            // A database that holds rows when a migration arrives (a bulk load, an upgrade) is
            // analyzed after it.
            let tenant = try await TestDatabase.createTenant("analyzed", in: database)
            try await SignInFixtures.loadUnanalyzed(database, tenant: tenant, accounts: 100)
            let next = Migration(version: 9_000, name: "test_next", sql: "COMMENT ON TABLE accounts IS 'test'")
            let migrator = database.migrator(migrations: try Migration.bundled() + [next])
            #expect(try await migrator.migrate().map(\.version) == [9_000])
            #expect(try await Self.analyzed("accounts", database))
            #expect(try await Self.analyzed("sessions", database))
            let auditAnalyzed = try await Self.analyzed("audit_log", database)
            let auditHasRows = try await Self.hasRows("audit_log", database)
            #expect(auditAnalyzed == auditHasRows)
        }
    }

    static func hasRows(_ table: String, _ database: Database) async throws -> Bool {
        let rows = try await database.client.query(
            PostgresQuery(unsafeSQL: "SELECT EXISTS (SELECT 1 FROM \(table))"), logger: TestDatabase.logger)
        var result = false
        for try await value in rows.decode(Bool.self) { result = value }
        return result
    }

    /// Whether PostgreSQL holds statistics for `table` (`reltuples` is -1 until it is analyzed).
    static func analyzed(_ table: String, _ database: Database) async throws -> Bool {
        let rows = try await database.client.query(
            "SELECT reltuples >= 0 FROM pg_class WHERE relname = \(table) AND relkind = 'r'", logger: TestDatabase.logger)
        var result = false
        for try await value in rows.decode(Bool.self) { result = value }
        return result
    }

    @Test func theBrokersConnectionsBoundEveryStatement() async throws {
        #expect(
            DatabaseConfiguration(endpoint: .tcp(host: "127.0.0.1", port: 5432), username: "u", database: "d")
                .startupParameters.contains { $0 == ("statement_timeout", "5000") })
        let (_, _, created) = try await TestDatabase.create()
        var configuration = created
        configuration.statementTimeout = .milliseconds(300)
        let database = try Database(configuration: configuration, logger: TestDatabase.logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await database.run() }
            defer { group.cancelAll() }
            let rows = try await database.client.query(
                "SELECT current_setting('statement_timeout'), current_setting('jit'), current_setting('plan_cache_mode')",
                logger: TestDatabase.logger)
            for try await (timeout, jit, plans) in rows.decode((String, String, String).self) {
                #expect(timeout == "300ms" && jit == "off" && plans == "force_generic_plan")
            }
            await #expect(throws: PSQLError.self) {
                _ = try await database.client.query("SELECT pg_sleep(5)", logger: TestDatabase.logger).collect()
            }
        }
    }
}

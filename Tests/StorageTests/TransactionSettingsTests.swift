import Foundation
import PostgresNIO
@testable import Storage
import Testing
import TestSupport

/// With the tenant scope per transaction (the setting for a pooler in transaction mode, decision
/// 0086), no connection starts with the session settings: each transaction sets the statement
/// timeout, `jit` and `plan_cache_mode` with its scope. And with unnamed statements no
/// connection prepares anything.
@Suite struct TransactionSettingsTests {
    static func withServing<T: Sendable>(
        perTransaction: Bool, named: Bool, _ body: @Sendable (_ serving: Database, _ admin: Database) async throws -> T
    ) async throws -> T {
        let (_, _, configuration) = try await TestDatabase.create()
        let admin = try Database(configuration: configuration, logger: TestDatabase.logger)
        var serving = configuration
        serving.username = Migrator.serveRole
        serving.tenantScopePerTransaction = perTransaction
        serving.namedStatements = named
        serving.statementTimeout = .milliseconds(1_500)
        // One connection: what one statement prepared, the next one sees.
        serving.maxConnections = 1
        let database = try Database(configuration: serving, logger: TestDatabase.logger)
        return try await withThrowingTaskGroup(of: Void.self, returning: T.self) { group in
            group.addTask { await admin.run() }
            group.addTask { await database.run() }
            defer { group.cancelAll() }
            try await admin.migrator().migrate()
            return try await body(database, admin)
        }
    }

    static func setting(_ name: String, _ database: Database) async throws -> String {
        try await TenantScope.acrossTenants(because: "a test reads a setting") {
            try await database.client.rows(PostgresQuery(unsafeSQL: "SELECT current_setting('\(name)')"), logger: TestDatabase.logger)
                .first?.decode(String.self) ?? ""
        }
    }

    @Test(arguments: [true, false]) func eachStatementRunsUnderTheSessionSettings(perTransaction: Bool) async throws {
        try await Self.withServing(perTransaction: perTransaction, named: true) {
            (database: Database, admin: Database) async throws -> Void in
            #expect(try await Self.setting("statement_timeout", database) == "1500ms")
            #expect(try await Self.setting("jit", database) == "off")
            #expect(try await Self.setting("plan_cache_mode", database) == "force_generic_plan")
            // And the timeout holds: a statement waiting on a lock the test holds is cancelled
            // (SQLSTATE 57014) once it has waited that long.
            try await admin.client.withConnection { holder in
                _ = try await holder.query("SELECT pg_advisory_lock(4242)", logger: TestDatabase.logger)
                let error = await #expect(throws: PSQLError.self) {
                    try await TenantScope.acrossTenants(because: "a test waits on a lock") {
                        _ = try await database.client.rows("SELECT pg_advisory_lock(4242)", logger: TestDatabase.logger)
                    }
                }
                #expect(error?.serverInfo?[.sqlState] == "57014")
                _ = try await holder.query("SELECT pg_advisory_unlock(4242)", logger: TestDatabase.logger)
            }
        }
    }

    @Test func perTransactionNoConnectionStartsWithThem() async throws {
        try await Self.withServing(perTransaction: true, named: true) { database, _ in
            // A connection of the pool outside any transaction: PostgreSQL's defaults.
            let outside = try await database.client.withConnection { connection in
                try await connection.query("SELECT current_setting('statement_timeout')", logger: TestDatabase.logger)
                    .collect().first?.decode(String.self)
            }
            #expect(outside == "0")
        }
    }

    @Test(arguments: [true, false]) func unnamedStatementsPrepareNothing(named: Bool) async throws {
        try await Self.withServing(perTransaction: true, named: named) { database, _ in
            let prepared = try await TenantScope.acrossTenants(because: "a test counts prepared statements") {
                _ = try await database.client.rows(BackendPIDStatement(), logger: TestDatabase.logger)
                return try await database.client.rows(
                    "SELECT count(*)::int FROM pg_prepared_statements WHERE name = 'ib_test_backend_pid'", logger: TestDatabase.logger
                ).first?.decode(Int.self)
            }
            #expect(prepared == (named ? 1 : 0))
            let answer = try await TenantScope.acrossTenants(because: "a test") {
                try await database.client.rows(BackendPIDStatement(), logger: TestDatabase.logger)
            }
            #expect(answer.count == 1 && answer[0] > 0, "the rows are decoded as the prepared statement's")
        }
    }
}

/// A named prepared statement for the tests above: the backend's pid.
private struct BackendPIDStatement: PostgresPreparedStatement {
    static let name = "ib_test_backend_pid"
    static let sql = "SELECT pg_backend_pid()"
    typealias Row = Int32
    func makeBindings() -> PostgresBindings { PostgresBindings() }
    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Int32.self) }
}

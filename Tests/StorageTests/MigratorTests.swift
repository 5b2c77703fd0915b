import Foundation
import PostgresNIO
import Storage
import TestSupport
import Testing

@Suite struct MigratorTests {
    @Test func migratesFromEmptyAndRerunIsANoOp() async throws {
        try await TestDatabase.withFresh(migrated: false) { database, _ in
            let migrator = try database.migrator()
            let before = try await migrator.status()
            #expect(before.applied.isEmpty)
            #expect(before.pending.count == (try Migration.bundled()).count)

            let applied = try await migrator.migrate()
            #expect(applied.count == before.pending.count)
            #expect(try await migrator.migrate().isEmpty)

            let after = try await migrator.status()
            #expect(after.pending.isEmpty && after.modified.isEmpty && after.unknown.isEmpty)
            #expect(after.applied.map(\.version) == applied.map(\.version))
            // The whole data model exists.
            let rows = try await database.client.query(
                "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public'")
            var tables: Set<String> = []
            for try await name in rows.decode(String.self) { tables.insert(name) }
            let expected: Set<String> = [
                "tenants", "api_keys", "signing_keys", "apple_teams", "apple_app_groups", "apple_clients",
                "provider_configs", "accounts", "identities", "sessions", "refresh_tokens", "web_auth_requests",
                "notification_receipts", "audit_log", "events_outbox", "import_jobs", "schema_migrations",
            ]
            #expect(expected.isSubset(of: tables), "missing: \(expected.subtracting(tables))")
        }
    }

    @Test func concurrentMigratorsApplyOnce() async throws {
        try await TestDatabase.withFresh(migrated: false) { database, _ in
            let count = try Migration.bundled().count
            let results = try await withThrowingTaskGroup(of: Int.self, returning: [Int].self) { group in
                for _ in 0..<4 { group.addTask { try await database.migrator().migrate().count } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(results.sorted() == [0, 0, 0, count])
            let rows = try await database.client.query("SELECT count(*)::int FROM schema_migrations")
            for try await applied in rows.decode(Int.self) { #expect(applied == count) }
        }
    }

    /// A role that may use the tables but not create any (the role `serve` runs as, not the one
    /// that migrates) checks the schema and finds nothing to do; with a migration pending it
    /// fails (and says so), instead of failing on the bookkeeping table it cannot create.
    @Test func aRoleWithoutCreateChecksAnUpToDateSchema() async throws {
        try await TestDatabase.withFresh { database, url in
            let role = "t_serve_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased()
            let name = TestDatabase.name(of: url)
            try await TestDatabase.adminQuery("CREATE ROLE \(role) LOGIN")
            _ = try await database.client.query(PostgresQuery(unsafeSQL: "REVOKE CREATE ON SCHEMA public FROM PUBLIC"))
            _ = try await database.client.query(PostgresQuery(unsafeSQL: "GRANT SELECT ON schema_migrations TO \(role)"))
            var configuration = try DatabaseConfiguration(url: url.replacingOccurrences(of: "user=postgres", with: "user=\(role)"))
            configuration.database = name
            let serving = try Database(configuration: configuration, logger: TestDatabase.logger)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await serving.run() }
                defer { group.cancelAll() }
                let migrator = try serving.migrator()
                #expect(try await migrator.migrate().isEmpty)
                #expect(try await migrator.status().pending.isEmpty)
                // A release with a new migration: refused with what to do, nothing applied.
                var migrations = try Migration.bundled()
                migrations.append(Migration(version: 9_999, name: "next_release", sql: "CREATE TABLE next_release (id int)"))
                let next = serving.migrator(migrations: migrations)
                let error = await #expect(throws: StorageError.self) { try await next.migrate() }
                guard case .migrationNotPermitted(let message)? = error else { Issue.record("\(String(describing: error))"); return }
                #expect(message.contains("9999_next_release is pending"))
                #expect(try await next.status().pending.map(\.version) == [9_999])
            }
        }
    }

    @Test func anEditedAppliedMigrationIsRefused() async throws {
        try await TestDatabase.withFresh { database, _ in
            var migrations = try Migration.bundled()
            let first = migrations[0]
            migrations[0] = Migration(version: first.version, name: first.name, sql: first.sql + "\n-- edited\n")
            let edited = database.migrator(migrations: migrations)
            await #expect(throws: StorageError.self) { try await edited.migrate() }
            #expect(try await edited.status().modified.map(\.version) == [first.version])
        }
    }

    @Test func aFailingMigrationRollsBackWhole() async throws {
        try await TestDatabase.withFresh { database, _ in
            let broken = Migration(version: 9_999, name: "broken", sql: "CREATE TABLE half_done (x int);\nSELECT nonsense;")
            let migrator = database.migrator(migrations: try Migration.bundled() + [broken])
            await #expect(throws: (any Error).self) { try await migrator.migrate() }
            let rows = try await database.client.query("SELECT to_regclass('half_done')::text")
            for try await table in rows.decode(String?.self) { #expect(table == nil) }
            #expect(try await migrator.status().pending.map(\.version) == [9_999])
        }
    }

    @Test func migrationFilesAreNamedAndOrdered() throws {
        #expect(Migration(fileName: "0002_add_things.sql", sql: "")?.version == 2)
        #expect(Migration(fileName: "0002_add_things.sql", sql: "")?.name == "add_things")
        #expect(Migration(fileName: "add_things.sql", sql: "") == nil)
        #expect(Migration(fileName: "0002_x.txt", sql: "") == nil)
        let versions = try Migration.bundled().map(\.version)
        #expect(versions == versions.sorted() && versions.first == 1)
    }
}

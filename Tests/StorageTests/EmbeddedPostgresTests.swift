import Foundation
import Logging
import PostgresNIO
import Storage
import TestSupport
import Testing

@Suite(.serialized) struct EmbeddedPostgresTests {
    func temporaryDataDirectory() throws -> URL {
        let url = URL(fileURLWithPath: "/tmp/ib-embedded-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    func tenantCount(_ embedded: EmbeddedPostgres) async throws -> Int {
        let database = try Database(configuration: embedded.databaseConfiguration, logger: TestDatabase.logger)
        return try await withThrowingTaskGroup(of: Void.self, returning: Int.self) { group in
            group.addTask { await database.run() }
            defer { group.cancelAll() }
            try await database.migrator().migrate()
            return try await database.tenants.list().count
        }
    }

    @Test func startStopRestartKeepsDataAndSharesTheCluster() async throws {
        let directory = try temporaryDataDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let embedded = try EmbeddedPostgres(
            dataDirectory: directory, binDirectory: ProcessInfo.processInfo.environment["BROKER_POSTGRES_BIN"],
            logger: TestDatabase.logger)

        let first = try embedded.start()
        #expect(try embedded.isRunning())
        #expect(try await tenantCount(embedded) == 0)
        let database = try Database(configuration: embedded.databaseConfiguration, logger: TestDatabase.logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await database.run() }
            defer { group.cancelAll() }
            try await database.client.query("INSERT INTO tenants (id, slug, display_name) VALUES (gen_random_uuid(), 'kept', 'Kept')")
        }

        // A second user of the same folder shares the running cluster; releasing it keeps the cluster up.
        let second = try embedded.start()
        second.release()
        #expect(try embedded.isRunning())

        first.release()
        #expect(try !embedded.isRunning())

        let again = try embedded.start()
        defer { again.release() }
        #expect(try await tenantCount(embedded) == 1)
    }

    @Test func socketPathStaysShortForLongDataDirectories() throws {
        let long = URL(fileURLWithPath: "/tmp/" + String(repeating: "d", count: 120))
        let embedded = try EmbeddedPostgres(dataDirectory: long, logger: TestDatabase.logger)
        #expect((embedded.socketDirectory + "/.s.PGSQL.5432").utf8.count < 108)
    }
}

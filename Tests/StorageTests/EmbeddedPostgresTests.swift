import Foundation
import Logging
import PostgresNIO
@testable import Storage
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

    @Test func aLongDataDirectoryGetsAPrivateUnpredictableSocketFolder() throws {
        let long = URL(fileURLWithPath: "/tmp/ib-long-\(UUID().uuidString.prefix(8))-" + String(repeating: "d", count: 110))
        try FileManager.default.createDirectory(at: long, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: long) }
        let embedded = try EmbeddedPostgres(dataDirectory: long, logger: TestDatabase.logger)
        try embedded.prepareSocketDirectory()
        let folder = embedded.socketDirectory
        defer { try? FileManager.default.removeItem(atPath: folder) }
        #expect(folder.hasPrefix("/tmp/identitybroker-"))
        #expect((folder + "/.s.PGSQL.5432").utf8.count < 108)
        let attributes = try FileManager.default.attributesOfItem(atPath: folder)
        #expect((attributes[.posixPermissions] as? Int) == 0o700)
        // Recorded: every process sharing the data folder finds the same one, and preparing
        // again keeps it.
        let again = try EmbeddedPostgres(dataDirectory: long, logger: TestDatabase.logger)
        try again.prepareSocketDirectory()
        #expect(again.socketDirectory == folder)
        // Another data folder gets another, unpredictable name.
        let other = URL(fileURLWithPath: long.path + "x")
        try FileManager.default.createDirectory(at: other, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: other) }
        let third = try EmbeddedPostgres(dataDirectory: other, logger: TestDatabase.logger)
        try third.prepareSocketDirectory()
        defer { try? FileManager.default.removeItem(atPath: third.socketDirectory) }
        #expect(third.socketDirectory != folder)
    }

    @Test func aSocketFolderThatIsNotPrivateIsRefused() throws {
        let data = try temporaryDataDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        // Pre-created by someone else's rules: world-readable.
        let run = data.appendingPathComponent("run").path
        try FileManager.default.createDirectory(atPath: run, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o777])
        let embedded = try EmbeddedPostgres(dataDirectory: data, logger: TestDatabase.logger)
        #expect(throws: StorageError.self) { try embedded.prepareSocketDirectory() }
        // A link in its place is refused too.
        try FileManager.default.removeItem(atPath: run)
        try FileManager.default.createSymbolicLink(atPath: run, withDestinationPath: "/tmp")
        #expect(throws: StorageError.self) { try embedded.prepareSocketDirectory() }
    }
}

import Foundation
import Logging
import PostgresNIO

/// Applies migrations in order, each in its own transaction, under a PostgreSQL advisory lock
/// so that concurrent starters are safe: one applies, the others wait and find nothing to do.
public struct Migrator: Sendable {
    /// Arbitrary constant: the advisory lock key of "migrating the broker schema".
    static let lockKey: Int64 = 0x1d_b0_4e_11

    public struct AppliedMigration: Sendable, Equatable {
        public let version: Int
        public let name: String
        public let checksum: String
        public let appliedAt: Date
    }

    public struct Status: Sendable {
        public let applied: [AppliedMigration]
        public let pending: [Migration]
        /// Applied migrations whose file changed since.
        public let modified: [AppliedMigration]
        /// Applied migrations this broker does not know (a newer broker ran here).
        public let unknown: [AppliedMigration]
    }

    let client: PostgresClient
    let migrations: [Migration]
    let logger: Logger

    public init(client: PostgresClient, migrations: [Migration], logger: Logger) {
        self.client = client
        self.migrations = migrations
        self.logger = logger
    }

    public func status() async throws -> Status {
        try await client.withConnection { connection in
            try await ensureTable(connection)
            let applied = try await appliedMigrations(connection)
            return classify(applied)
        }
    }

    /// Applies pending migrations; returns the ones it applied.
    @discardableResult
    public func migrate() async throws -> [Migration] {
        try await client.withConnection { connection in
            try await connection.query("SELECT pg_advisory_lock(\(Self.lockKey))", logger: logger)
            do {
                let applied = try await apply(on: connection)
                try await connection.query("SELECT pg_advisory_unlock(\(Self.lockKey))", logger: logger)
                return applied
            } catch {
                _ = try? await connection.query("SELECT pg_advisory_unlock(\(Self.lockKey))", logger: logger)
                throw error
            }
        }
    }

    private func apply(on connection: PostgresConnection) async throws -> [Migration] {
        try await ensureTable(connection)
        let status = classify(try await appliedMigrations(connection))
        if let modified = status.modified.first {
            throw StorageError.migration(
                "Migration \(String(format: "%04d", modified.version))_\(modified.name).sql was edited after it was applied "
                    + "(checksum \(modified.checksum.prefix(12))… in the database). Applied migrations must never change: "
                    + "restore the file and put the change in a new migration.")
        }
        var done: [Migration] = []
        for migration in status.pending {
            logger.info("applying migration", metadata: ["version": "\(migration.version)", "name": "\(migration.name)"])
            try await connection.withTransaction(logger: logger) { connection in
                for statement in SQLScript.statements(migration.sql) {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await connection.query(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES (\(migration.version), \(migration.name), \(migration.checksum))",
                    logger: logger)
            }
            done.append(migration)
        }
        return done
    }

    private func ensureTable(_ connection: PostgresConnection) async throws {
        // Two first-time migrators may race here; IF NOT EXISTS plus the unique violation
        // being ignored keeps both alive.
        do {
            try await connection.query(
                """
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    version integer PRIMARY KEY,
                    name text NOT NULL,
                    checksum text NOT NULL,
                    applied_at timestamptz NOT NULL DEFAULT now()
                )
                """, logger: logger)
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "23505" {
            return
        }
    }

    private func appliedMigrations(_ connection: PostgresConnection) async throws -> [AppliedMigration] {
        let rows = try await connection.query(
            "SELECT version, name, checksum, applied_at FROM schema_migrations ORDER BY version", logger: logger)
        var result: [AppliedMigration] = []
        for try await (version, name, checksum, appliedAt) in rows.decode((Int, String, String, Date).self) {
            result.append(.init(version: version, name: name, checksum: checksum, appliedAt: appliedAt))
        }
        return result
    }

    private func classify(_ applied: [AppliedMigration]) -> Status {
        let known = Dictionary(uniqueKeysWithValues: migrations.map { ($0.version, $0) })
        let appliedVersions = Set(applied.map(\.version))
        return Status(
            applied: applied,
            pending: migrations.filter { !appliedVersions.contains($0.version) },
            modified: applied.filter { applied in
                known[applied.version].map { $0.checksum != applied.checksum } ?? false
            },
            unknown: applied.filter { known[$0.version] == nil }
        )
    }
}

import Foundation
import Logging
import PostgresNIO

/// Applies migrations in order, each in its own transaction, under a PostgreSQL advisory lock
/// so that concurrent starters are safe: one applies, the others wait and find nothing to do.
/// The lock is the session's, so the migrator works on a connection of its own opened where the
/// work that holds a session connects (``DatabaseConfiguration/forSessionWork``,
/// `BROKER_DB_SESSION_URL`): never through a pooler in transaction mode, which would leave the
/// lock on a server connection other clients then use (decision 0086).
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

    /// Where the migrator connects: a database configuration's ``DatabaseConfiguration/forSessionWork``.
    let target: DatabaseConfiguration
    let migrations: [Migration]
    let logger: Logger

    init(target: DatabaseConfiguration, migrations: [Migration], logger: Logger) {
        self.target = target
        self.migrations = migrations
        self.logger = logger
    }

    /// `body` on a connection of the migrator's own, scoped to every tenant (the migrator reads
    /// every tenant's rows: the ANALYZE probe, the applied migrations), closed afterwards.
    private func withConnection<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        let connection = try await PostgresConnection.connect(
            configuration: try target.connectionConfiguration(), id: 0, logger: logger)
        do {
            try await PostgresClient.enterTenantScope(on: connection, .allTenants, record: nil, logger: logger)
            let result = try await body(connection)
            try? await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }

    /// The role `broker serve` runs as (decision 0055): no superuser, no `BYPASSRLS`, no
    /// `CREATE`; it reads and writes the broker's tables through the tenant wall. Each
    /// migration run grants it what it needs when it exists.
    public static let serveRole = "broker_serve"

    public func status() async throws -> Status {
        try await withConnection { connection in
            try await ensureTable(connection)
            let applied = try await appliedMigrations(connection)
            return classify(applied)
        }
    }

    /// Applies pending migrations; returns the ones it applied. Then grants ``serveRole`` its
    /// privileges on every table, when the role exists; `creatingServeRole` creates it first
    /// (the embedded default, whose migrator is a superuser; on another database the operator
    /// creates it, see the operator guide).
    @discardableResult
    public func migrate(creatingServeRole: Bool = false) async throws -> [Migration] {
        try await withConnection { connection in
            // Migrations and the ANALYZE after them may run longer than a request's statement.
            try await connection.query("SET statement_timeout = 0", logger: logger)
            try await connection.query("SELECT pg_advisory_lock(\(Self.lockKey))", logger: logger)
            do {
                let applied = try await apply(on: connection)
                if !applied.isEmpty { try await analyzeTablesWithRows(on: connection) }
                if creatingServeRole { try await createServeRole(on: connection) }
                try await grantServeRole(on: connection)
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
            do {
                try await connection.withTransaction(logger: logger) { connection in
                    for statement in SQLScript.statements(migration.sql) {
                        try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                    }
                    try await connection.query(
                        "INSERT INTO schema_migrations (version, name, checksum) VALUES (\(migration.version), \(migration.name), \(migration.checksum))",
                        logger: logger)
                }
            } catch let error as PostgresTransactionError
                where (error.closureError as? PSQLError)?.serverInfo?[.sqlState] == "42501"
            {
                // The role that serves (decision 0055) may use the tables but not change them.
                throw StorageError.migrationNotPermitted(
                    "Migration \(String(format: "%04d", migration.version))_\(migration.name) is pending, and this database role may not "
                        + "change the schema (PostgreSQL: permission denied).")
            }
            done.append(migration)
        }
        return done
    }

    /// Fresh statistics for every table that holds rows, after migrations changed the schema
    /// (decision 0014). Empty tables are left alone: an ANALYZE of an empty table tells the
    /// planner it is empty, every access path then costs nothing and a prepared statement's
    /// generic plan may pick any of them, and keep it while the table grows. A table never
    /// analyzed is planned as ten pages until autovacuum analyzes its first rows, which keyed
    /// lookups win clearly.
    private func analyzeTablesWithRows(on connection: PostgresConnection) async throws {
        let rows = try await connection.query(
            "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r'",
            logger: logger)
        var tables: [String] = []
        for try await name in rows.decode(String.self) { tables.append(name) }
        for table in tables {
            let quoted = "\"" + table.replacingOccurrences(of: "\"", with: "\"\"") + "\""
            let probe = try await connection.query(
                PostgresQuery(unsafeSQL: "SELECT EXISTS (SELECT 1 FROM \(quoted))"), logger: logger)
            var hasRows = false
            for try await value in probe.decode(Bool.self) { hasRows = value }
            if hasRows { try await connection.query(PostgresQuery(unsafeSQL: "ANALYZE \(quoted)"), logger: logger) }
        }
    }

    private func createServeRole(on connection: PostgresConnection) async throws {
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    DO $$ BEGIN
                        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '\(Self.serveRole)') THEN
                            CREATE ROLE \(Self.serveRole) LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
                        END IF;
                    END $$
                    """), logger: logger)
    }

    /// What ``serveRole`` may do: read and write every table of the schema (through the
    /// wall), only read `schema_migrations`, use the sequences. Granted by the schema's owner
    /// only (a role that merely serves finds nothing to migrate and grants nothing).
    private func grantServeRole(on connection: PostgresConnection) async throws {
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    DO $$ BEGIN
                        IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '\(Self.serveRole)')
                            AND pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = 'schema_migrations'::regclass), 'USAGE') THEN
                            EXECUTE format('GRANT USAGE ON SCHEMA %I TO \(Self.serveRole)', current_schema());
                            EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %I TO \(Self.serveRole)', current_schema());
                            EXECUTE format('GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA %I TO \(Self.serveRole)', current_schema());
                            REVOKE INSERT, UPDATE, DELETE ON schema_migrations FROM \(Self.serveRole);
                        END IF;
                    END $$
                    """), logger: logger)
    }

    private func ensureTable(_ connection: PostgresConnection) async throws {
        // Looked up first: a role without CREATE on the schema (one that serves, not one that
        // migrates) may read the table but not run CREATE TABLE, not even IF NOT EXISTS.
        // Read to the end before the next statement on this connection.
        let existing = try await connection.query("SELECT to_regclass('schema_migrations') IS NOT NULL", logger: logger)
            .collect()
        if try existing.first?.decode(Bool.self) == true { return }
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

import ArgumentParser
import BrokerApplication
import BrokerCore
import BrokerServer
import Foundation
import Logging
import Storage

/// Options every admin command takes.
struct CommonOptions: ParsableArguments {
    @Flag(name: .long, help: "Print machine-readable JSON.")
    var json = false
}

/// The database and secrets a command works with, resolved from the environment.
struct CLIContext {
    let configuration: BrokerConfiguration
    let logger: Logger

    init(logLevel: Logger.Level = .warning, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        configuration = try BrokerConfiguration(environment: environment)
        configuration.applyProcessSettings()
        logger = LogSetup.logger(label: "broker", configuration: configuration, defaultLevel: logLevel)
    }

    var actor: String { "cli:\(ProcessInfo.processInfo.userName)" }

    /// The master key: `BROKER_MASTER_KEY`, or with the embedded default the generated key file.
    func masterKey() throws -> MasterKey {
        if let value = configuration.masterKey { return try MasterKey(base64: value) }
        guard configuration.databaseURL == nil else {
            throw BrokerError.invalidArgument(
                "BROKER_MASTER_KEY is not set. With DATABASE_URL the broker needs the master key that encrypts its secrets.",
                hint: "Set BROKER_MASTER_KEY to the base64 key this database was set up with (new setup: openssl rand -base64 32).")
        }
        return try MasterKeyFile.loadOrCreate(in: configuration.dataDirectory)
    }

    /// Runs `body` with a connected database: the embedded default (started if needed and
    /// stopped afterwards unless another broker process uses it) or `DATABASE_URL`.
    /// `migrate`: `.always` applies pending migrations first; `.embeddedOnly` applies them to
    /// the private embedded database and refuses to work on an external one that lacks them;
    /// `.never` neither applies nor checks (the `db` commands); `.require` only checks.
    /// An admin command works across tenants (its statements filter by the tenant it names);
    /// `serving` runs `body` outside any tenant scope (each request takes its own) and, on the
    /// embedded default, connects as the role that serves (decision 0055), which
    /// `broker db migrate` and every migration at start create and grant there.
    func withDatabase<T: Sendable>(
        migrate: MigrationPolicy = .embeddedOnly, serving: Bool = false, _ body: @Sendable (Database) async throws -> T
    ) async throws -> T {
        let lease: EmbeddedPostgres.Lease?
        let databaseConfiguration: DatabaseConfiguration
        if let url = configuration.databaseURL {
            var urlConfiguration = try DatabaseConfiguration(url: url, maxConnections: configuration.databasePoolSize)
            urlConfiguration.statementTimeout = .seconds(configuration.databaseStatementTimeout)
            urlConfiguration.batchStatementsAtOnce = configuration.databaseSignInBatches
            urlConfiguration.tenantScopePerTransaction = configuration.databaseTenantScopePerTransaction
            urlConfiguration.connectTimeout = .seconds(configuration.databaseConnectTimeout)
            urlConfiguration.namedStatements = configuration.databaseNamedStatements
            if let sessionURL = configuration.databaseSessionURL {
                var session: DatabaseConfiguration
                do { session = try DatabaseConfiguration(url: sessionURL) } catch {
                    throw BrokerError.invalidArgument(
                        "BROKER_DB_SESSION_URL must look like postgres://user:password@host:5432/database.",
                        hint: "Point it at PostgreSQL directly, or at a pool of the pooler in session mode.")
                }
                session.connectTimeout = urlConfiguration.connectTimeout
                urlConfiguration.sessionTarget = session
            }
            databaseConfiguration = urlConfiguration
            lease = nil
        } else {
            let embedded = try EmbeddedPostgres(
                dataDirectory: configuration.dataDirectory, binDirectory: configuration.postgresBinDirectory,
                unprivilegedUser: configuration.postgresUser, logger: logger)
            lease = try embedded.start()
            var embeddedConfiguration = embedded.databaseConfiguration
            embeddedConfiguration.maxConnections = configuration.databasePoolSize
            embeddedConfiguration.statementTimeout = .seconds(configuration.databaseStatementTimeout)
            embeddedConfiguration.batchStatementsAtOnce = configuration.databaseSignInBatches
            embeddedConfiguration.tenantScopePerTransaction = configuration.databaseTenantScopePerTransaction
            embeddedConfiguration.connectTimeout = .seconds(configuration.databaseConnectTimeout)
            embeddedConfiguration.namedStatements = configuration.databaseNamedStatements
            databaseConfiguration = embeddedConfiguration
        }
        defer { lease?.release() }
        // Fail within BROKER_DB_CONNECT_TIMEOUT, naming the cause, rather than wait on a pool
        // that retries a database that is down, missing or refusing us.
        try await DatabaseConnectCheck.check(
            databaseConfiguration, timeout: .seconds(configuration.databaseConnectTimeout), logger: logger)
        // Through a pooler in transaction mode, only as the broker is set up for one (decision 0086).
        if lease == nil { try await PoolerRefusal.check(databaseConfiguration, logger: logger) }
        let database = try Database(configuration: databaseConfiguration, logger: logger)
        let isEmbedded = lease != nil
        return try await withThrowingTaskGroup(of: Void.self, returning: T.self) { group in
            group.addTask { await database.run() }
            defer { group.cancelAll() }
            let migrator = try database.migrator()
            switch migrate {
            case .always:
                try await migrator.migrate(creatingServeRole: isEmbedded)
            case .embeddedOnly where isEmbedded:
                try await migrator.migrate(creatingServeRole: true)
            case .never:
                break
            case .embeddedOnly, .require:
                if let pending = try await migrator.status().pending.first {
                    throw BrokerError(
                        code: "migrations_pending", kind: .unavailable, title: "Database not migrated",
                        detail: "The database at \(databaseConfiguration) lacks migration \(pending.version) (\(pending.name)).",
                        hint: "Run 'broker db migrate' first.")
                }
            }
            // A master key that is not the one the database's secrets are sealed with is refused
            // before anything is served or written (issue 39 B8). Commands that have no key
            // (DATABASE_URL without BROKER_MASTER_KEY) need none and are not checked.
            if migrate != .never, let key = try? masterKey() {
                _ = try await TenantScope.acrossTenants(because: "the master key check is no tenant's") {
                    try await MasterKeyCheck.verify(SecretBox(masterKey: key), database: database)
                }
            }
            guard serving else {
                return try await TenantScope.acrossTenants(because: "an operator's command names its tenant itself") {
                    try await body(database)
                }
            }
            guard isEmbedded else { return try await body(database) }
            var servingConfiguration = databaseConfiguration
            servingConfiguration.username = Migrator.serveRole
            let servingDatabase = try Database(configuration: servingConfiguration, logger: logger)
            group.addTask { await servingDatabase.run() }
            return try await body(servingDatabase)
        }
    }

    enum MigrationPolicy: Equatable { case always, embeddedOnly, require, never }
}

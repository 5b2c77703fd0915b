import BrokerCore
import Foundation
import Logging
import PostgresNIO
import Storage

/// A fresh, migrated database per test on the throwaway cluster that scripts/test.sh starts
/// (`BROKER_TEST_DATABASE_URL`). Tests never share a database, so they run in parallel.
public enum TestDatabase {
    public struct MissingCluster: Error, CustomStringConvertible {
        public var description: String {
            "BROKER_TEST_DATABASE_URL is not set: run the tests with scripts/test.sh, which starts a PostgreSQL for them."
        }
    }

    public static var logger: Logger {
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        return logger
    }

    /// The admin URL of the test cluster.
    public static func clusterURL() throws -> String {
        guard let url = ProcessInfo.processInfo.environment["BROKER_TEST_DATABASE_URL"] else { throw MissingCluster() }
        return url
    }

    /// Runs one statement on the test cluster's admin database (e.g. to take a test's own
    /// database away from its pool: `ALTER DATABASE ... ALLOW_CONNECTIONS false`).
    public static func adminQuery(_ sql: String) async throws {
        var admin = try DatabaseConfiguration(url: try clusterURL(), maxConnections: 1)
        admin.statementTimeout = .seconds(60)
        let client = PostgresClient(configuration: try admin.clientConfiguration(), backgroundLogger: logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            try await client.query(PostgresQuery(unsafeSQL: sql), logger: logger)
        }
    }

    /// The database name of a URL ``withFresh(migrated:_:)`` handed out.
    public static func name(of url: String) -> String {
        String(url.split(separator: "///").last?.prefix { $0 != "?" } ?? "")
    }

    /// Creates an empty database and returns its name and URL.
    public static func create() async throws -> (name: String, url: String, configuration: DatabaseConfiguration) {
        let adminURL = try clusterURL()
        let name = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(20)
        var admin = try DatabaseConfiguration(url: adminURL, maxConnections: 1)
        // Many tests create databases at once; CREATE DATABASE then waits its turn, and a busy
        // machine runs the suites' statements slowly: no request-sized timeout here.
        admin.statementTimeout = .seconds(300)
        let client = PostgresClient(configuration: try admin.clientConfiguration(), backgroundLogger: logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: logger)
        }
        var configuration = admin
        configuration.database = String(name)
        configuration.maxConnections = 8
        let url = adminURL.replacingOccurrences(of: "///postgres?", with: "///\(name)?")
        return (String(name), url, configuration)
    }

    /// Runs `body` with a connected ``Database`` on a fresh database (migrated unless told not to).
    public static func withFresh<T: Sendable>(
        migrated: Bool = true, _ body: @Sendable (Database, _ url: String) async throws -> T
    ) async throws -> T {
        let (_, url, configuration) = try await create()
        let database = try Database(configuration: configuration, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self, returning: T.self) { group in
            group.addTask { await database.run() }
            defer { group.cancelAll() }
            if migrated { try await database.migrator().migrate() }
            return try await body(database, url)
        }
    }

    /// Runs `body` with two connected ``Database``s on one fresh, migrated database: `admin`
    /// as the cluster's superuser (for a test's setup and its checks, which see every row) and
    /// `serving` as the role `broker serve` runs as, to which the tenant wall applies
    /// (decision 0055): the application under test runs on `serving`. `perTransaction`: the
    /// serving pool sets each statement's scope in a transaction around it
    /// (`BROKER_DB_TENANT_SCOPE=transaction`); nil: as `BROKER_TEST_TENANT_SCOPE` says
    /// (`transaction`, or the default per connection), to run a whole phase in either mode.
    public static func withFreshServing<T: Sendable>(
        perTransaction: Bool? = nil, _ body: @Sendable (_ admin: Database, _ serving: Database, _ url: String) async throws -> T
    ) async throws -> T {
        let (_, url, configuration) = try await create()
        let admin = try Database(configuration: configuration, logger: logger)
        var servingConfiguration = configuration
        servingConfiguration.username = Migrator.serveRole
        servingConfiguration.tenantScopePerTransaction =
            perTransaction ?? (ProcessInfo.processInfo.environment["BROKER_TEST_TENANT_SCOPE"] == "transaction")
        let serving = try Database(configuration: servingConfiguration, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self, returning: T.self) { group in
            group.addTask { await admin.run() }
            group.addTask { await serving.run() }
            defer { group.cancelAll() }
            try await admin.migrator().migrate()
            return try await body(admin, serving, url)
        }
    }

    /// The URL of a database ``withFresh(migrated:_:)`` or ``withFreshServing(_:)`` handed out,
    /// connecting as the role `broker serve` runs as.
    public static func servingURL(_ url: String) -> String {
        url.replacingOccurrences(of: "user=postgres", with: "user=\(Migrator.serveRole)")
    }

    /// A master key for tests.
    public static let masterKey: MasterKey = {
        // 32 fixed bytes: tests must be repeatable.
        let bytes = Data((0..<32).map { UInt8($0) })
        do { return try MasterKey(base64: bytes.base64EncodedString()) } catch { preconditionFailure("\(error)") }
    }()

    public static var secrets: SecretBox { SecretBox(masterKey: masterKey) }

    /// An active tenant with default settings and its first signing key (not yet stored).
    public static func makeTenant(_ slug: String) throws -> (Tenant, SigningKeyRecord) {
        let now = Date()
        let tenant = Tenant(
            id: UUID(), slug: try TenantSlug(slug), displayName: slug, status: .active, session: .default,
            linking: .default, keyActivationDelay: 600, createdAt: now, updatedAt: now)
        let material = SigningKeyMaterial.generate()
        let key = SigningKeyRecord(
            id: UUID(), tenantID: tenant.id, kid: material.kid, algorithm: "ES256", publicKey: material.publicKey,
            sealedPrivateKey: try secrets.seal(material.privateKey, context: "k"), createdAt: now,
            activatesAt: now, retiredAt: nil)
        return (tenant, key)
    }

    /// ``makeTenant(_:)``, stored in `database`.
    public static func createTenant(_ slug: String, in database: Database) async throws -> Tenant {
        let (tenant, key) = try makeTenant(slug)
        return try await database.tenants.create(tenant, firstKey: key, actor: "test")
    }
}

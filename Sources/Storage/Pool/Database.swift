import Logging
import PostgresNIO

/// The broker's PostgreSQL: a connection pool (`PostgresClient`) and the repositories on it.
/// The pool runs while `run()` runs; start it in a task group or as a service. After an outage
/// the pool is replaced once the database accepts connections again (``DatabasePool``,
/// decision 0032); `client` is always the one in use.
public struct Database: Sendable {
    public var client: PostgresClient { pool.client }
    public let logger: Logger
    /// What this process has seen of the database lately (outages are reported here).
    public let health: DatabaseHealth
    /// Where the pool connects; the LISTEN connection opens its own from it.
    let configuration: DatabaseConfiguration
    let pool: DatabasePool
    /// Identities whose sign-in stamp this process saw written lately (quiet-path hint).
    let recentSignIns: RecentSignIns
    /// Quiet sign-ins written in batches (decision 0030); nil when batching is off.
    let quietSignIns: QuietSignIns?
    /// First sign-ins written in batches (decision 0059); nil when batching is off.
    let firstSignIns: FirstSignIns?
    /// Stored identities' sign-ins that bring something new, in batches (decision 0063); nil
    /// when batching is off.
    let knownSignIns: KnownSignIns?
    /// Apple's email notifications written in batches (decision 0046); nil when batching is off.
    let emailNotifications: EmailNotificationBatch?
    /// Apple's consent revocations and account deletions written in batches (decision 0058);
    /// nil when batching is off.
    let consentRevocations: UnlinkingNotificationBatch?
    let accountDeleteNotifications: UnlinkingNotificationBatch?
    /// Refresh-token rotations written in batches (decision 0074); nil when batching is off.
    let refreshRotations: RefreshRotations?
    /// Web callbacks' claims of sealed states written in batches (decision 0102); nil when
    /// batching is off.
    let sealedClaims: SealedClaims?

    public init(configuration: DatabaseConfiguration, logger: Logger) throws {
        // The pool warns when a query races its own start-up; keep its background chatter at
        // error level unless debugging.
        var backgroundLogger = logger
        if backgroundLogger.logLevel > .debug { backgroundLogger.logLevel = .error }
        let health = DatabaseHealth()
        let pool = try DatabasePool(configuration: configuration, health: health, logger: logger, backgroundLogger: backgroundLogger)
        self.pool = pool
        self.health = health
        self.logger = logger
        self.configuration = configuration
        self.recentSignIns = RecentSignIns()
        // Every batcher: as many statements at once as configured, each bounded a second past
        // the statement timeout.
        let atOnce = configuration.batchStatementsAtOnce
        let batchTimeout = configuration.statementTimeout + .seconds(1)
        self.quietSignIns = AccountRepository.quietSignIns(
            pool: pool, logger: logger, maxRunning: atOnce, timeout: batchTimeout)
        self.firstSignIns = AccountRepository.firstSignIns(
            pool: pool, logger: logger, maxRunning: atOnce, timeout: batchTimeout)
        self.knownSignIns = AccountRepository.knownSignIns(
            pool: pool, logger: logger, maxRunning: atOnce, timeout: batchTimeout)
        self.emailNotifications = EmailNotificationBatchStatement.batcher(
            pool: pool, logger: logger, maxRunning: atOnce, timeout: batchTimeout)
        self.consentRevocations = ConsentRevocationStatement.batcher(
            pool: pool, logger: logger, maxRunning: atOnce, timeout: batchTimeout)
        self.accountDeleteNotifications = AccountDeleteNotificationStatement.batcher(
            pool: pool, logger: logger, maxRunning: atOnce, timeout: batchTimeout)
        self.refreshRotations = SessionRepository.rotations(
            pool: pool, logger: logger, maxRunning: atOnce, timeout: batchTimeout)
        self.sealedClaims = WebSignInRepository.sealedClaims(
            pool: pool, logger: logger, maxRunning: atOnce, timeout: batchTimeout)
    }

    /// Runs the pool until cancelled. The pool's own work (its state machine's events: a timer
    /// scheduled when a connection is parked and cancelled when it is leased again, for every
    /// statement) runs on one of NIO's event loops, beside the connections, instead of on the
    /// cooperative pool, where each of those events woke a thread of its own (decision 0022).
    /// After an outage a new pool takes over once the database is back (decision 0032).
    public func run() async {
        await pool.run()
    }

    public var tenants: TenantRepository { TenantRepository(client: client, logger: logger) }
    public var apiKeys: APIKeyRepository { APIKeyRepository(client: client, logger: logger) }
    public var signingKeys: SigningKeyRepository { SigningKeyRepository(client: client, logger: logger) }
    public var auditLog: AuditLogRepository { AuditLogRepository(client: client, logger: logger) }
    public var apple: AppleRepository { AppleRepository(client: client, logger: logger) }
    public var providerConfigs: ProviderConfigRepository { ProviderConfigRepository(client: client, logger: logger) }
    public var accounts: AccountRepository {
        AccountRepository(
            client: client, logger: logger, recentSignIns: recentSignIns, quietSignIns: quietSignIns, firstSignIns: firstSignIns,
            knownSignIns: knownSignIns)
    }
    public var sessions: SessionRepository { SessionRepository(client: client, logger: logger, rotations: refreshRotations) }
    public var loginPolicy: LoginPolicyRepository { LoginPolicyRepository(client: client, logger: logger) }
    public var webSignIns: WebSignInRepository { WebSignInRepository(client: client, logger: logger, sealedClaims: sealedClaims) }

    public func migrator() throws -> Migrator {
        migrator(migrations: try Migration.bundled())
    }

    /// A migrator of `migrations` (a test's earlier or later set) for this database.
    public func migrator(migrations: [Migration]) -> Migrator {
        Migrator(target: configuration.forSessionWork, migrations: migrations, logger: logger)
    }

    /// `SELECT 1`: is the database reachable? False when it does not answer within `timeout`
    /// (reported to ``health``).
    public func ping(timeout: Duration = .milliseconds(800)) async -> Bool {
        if await DatabasePool.ping(client, timeout: timeout, logger: logger) { return true }
        health.reportUnavailable()
        return false
    }
}

extension PSQLError {
    /// PostgreSQL's SQLSTATE of the failure, when the server sent one.
    var sqlState: String? { serverInfo?[.sqlState] }
    var isUniqueViolation: Bool { sqlState == "23505" }
    /// The unique index a unique violation hit.
    var violatedConstraint: String? { isUniqueViolation ? serverInfo?[.constraintName] : nil }
}

extension Error {
    /// The PostgreSQL error behind an error thrown inside `withTransaction`.
    var postgresError: PSQLError? {
        if let error = self as? PSQLError { return error }
        if let error = self as? PostgresTransactionError {
            return (error.closureError ?? error.commitError).flatMap { $0 as? PSQLError }
        }
        return nil
    }
}

/// A database failure as an operator reads it, without a query's values.
public enum DatabaseFailureSummary {
    /// `the database answered SQLSTATE 42P01`, or that the connection failed; nil when `error`
    /// is not the database's.
    public static func of(_ error: any Error) -> String? {
        guard let failure = error.postgresError else { return nil }
        if let state = failure.sqlState { return "the database answered SQLSTATE \(state)" }
        return "the database could not be reached or the connection failed"
    }

    /// ``of(_:)`` with the server's own message (its primary line, without the detail that may
    /// quote a row's values), for an operator at the CLI; nil when `error` is not the database's.
    public static func explained(_ error: any Error) -> String? {
        guard let summary = of(error) else { return nil }
        guard let message = error.postgresError?.serverInfo?[.message] else { return summary }
        return summary + ": " + message.prefix(300)
    }
}

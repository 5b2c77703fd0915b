import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import Synchronization

/// The connection pool (`PostgresClient`) the broker uses now, and the one place that replaces
/// it (decision 0032). PostgresNIO's pool retries a failed connection with a backoff that grows
/// to a minute, and after a minute of failures trips a circuit breaker that fails every
/// request until a retry gets through: after an outage of a minute or more, the database could
/// be back for half a minute before the pool noticed. When the database has been reported
/// unreachable, the supervisor pings the pool every half second; while the ping fails it tries
/// one connection of its own, and once that connects after having failed for want of the
/// database, it puts a new pool in place. The old one is shut down after the statement
/// timeout, so a statement still running on it finishes. Seen with PostgresNIO 1.33.2
/// (`_ConnectionPoolModule`: `calculateBackoff`, 100 ms × 1.25ⁿ capped at 60 s;
/// `circuitBreakerTripAfter` 60 s; neither settable through `PostgresClient.Configuration`, and
/// no call to retry now). The replacement can go when a release lets a client retry at once
/// (or caps the backoff) and `LongDatabaseOutageTests` passes without it; no reproduction in
/// `Benchmarks/upstream` (it takes a stopped database for over a minute; docs/upstream.md,
/// "The pool's backoff after a long outage").
final class DatabasePool: Sendable {
    private let current: Mutex<PostgresClient>
    private let makeClient: @Sendable () throws -> PostgresClient
    private let configuration: DatabaseConfiguration
    let health: DatabaseHealth
    private let logger: Logger

    init(configuration: DatabaseConfiguration, health: DatabaseHealth, logger: Logger, backgroundLogger: Logger) throws {
        let clientConfiguration = try configuration.clientConfiguration()
        let makeClient: @Sendable () throws -> PostgresClient = {
            let client = PostgresClient(
                configuration: clientConfiguration, eventLoopGroup: MultiThreadedEventLoopGroup.singleton,
                backgroundLogger: backgroundLogger)
            // The record of its connections' tenant scopes, dropped when its run ends.
            ConnectionScopes.register(client, configuration: configuration)
            return client
        }
        self.current = Mutex(try makeClient())
        self.makeClient = makeClient
        self.configuration = configuration
        self.health = health
        self.logger = logger
    }

    /// The pool to run statements on now.
    var client: PostgresClient { current.withLock { $0 } }

    /// Runs the pool in use, and every pool that replaces it, until cancelled.
    func run() async {
        let running = RunningPools()
        running.start(client)
        await withTaskCancellationHandler {
            for await _ in health.reported {
                await recover(running)
            }
        } onCancel: {
            running.cancelAll()
        }
        running.cancelAll()
        await running.waitForAll()
    }

    /// Until the pool answers a ping: while a connection of its own cannot reach the database,
    /// note the outage; once one gets through after that, replace the pool. A pool that does not
    /// answer while the database takes connections (it is busy, or PostgreSQL turned this
    /// client away) is left alone: it was not the outage that stalled it.
    private func recover(_ running: RunningPools) async {
        var sawOutage = false
        while !Task.isCancelled {
            if await Self.ping(client, timeout: .seconds(1), logger: logger) { return }
            health.note()
            switch await connectFailure() {
            case nil where sawOutage:
                let fresh: PostgresClient
                do { fresh = try makeClient() } catch { return }
                running.start(fresh)
                let old = current.withLock { current in
                    defer { current = fresh }
                    return current
                }
                logger.warning("database reachable again: connection pool replaced")
                running.retire(old, after: configuration.statementTimeout + .seconds(1))
                sawOutage = false
            case nil:
                return
            case let failure?:
                sawOutage = sawOutage || failure.isOutage
            }
            try? await Task.sleep(for: .milliseconds(500))
        }
    }

    /// `SELECT 1` on `client` within `timeout`.
    static func ping(_ client: PostgresClient, timeout: Duration, logger: Logger) async -> Bool {
        do {
            try await withDatabaseDeadline(timeout) { _ = try await client.rows("SELECT 1", logger: logger) }
            return true
        } catch {
            return false
        }
    }

    /// Why a connection of its own (outside every pool) cannot be opened now; nil when it can.
    private func connectFailure() async -> DatabaseConnectFailure? {
        do {
            try await DatabaseConnectCheck.check(configuration, timeout: .seconds(2), logger: logger)
            return nil
        } catch {
            return error
        }
    }
}

/// The pools' run tasks: the one in use and those being retired.
private final class RunningPools: Sendable {
    private let tasks = Mutex<[ObjectIdentifier: Task<Void, Never>]>([:])
    private let cancelled = Mutex(false)

    func start(_ client: PostgresClient) {
        // The pool's own work runs on an event loop (decision 0022).
        let task = Task(executorPreference: EventLoopTaskExecutor.executor(for: MultiThreadedEventLoopGroup.singleton.next())) {
            await client.run()
            ConnectionScopes.unregister(client)
        }
        let stop = cancelled.withLock { cancelled in
            if !cancelled { tasks.withLock { $0[ObjectIdentifier(client)] = task } }
            return cancelled
        }
        if stop { task.cancel() }
    }

    /// Shuts `client` down after `grace`: statements running on it finish, requests still
    /// waiting in it for a connection fail (503 `database_unavailable`) and are retried.
    func retire(_ client: PostgresClient, after grace: Duration) {
        guard let task = tasks.withLock({ $0[ObjectIdentifier(client)] }) else { return }
        Task {
            try? await Task.sleep(for: grace)
            task.cancel()
            await task.value
            _ = tasks.withLock { $0.removeValue(forKey: ObjectIdentifier(client)) }
        }
    }

    func cancelAll() {
        cancelled.withLock { $0 = true }
        for task in tasks.withLock({ Array($0.values) }) { task.cancel() }
    }

    func waitForAll() async {
        for task in tasks.withLock({ Array($0.values) }) { await task.value }
    }
}

import Foundation
import Logging
import PostgresNIO
import Synchronization

/// The scope each connection of one pool was last given, so that a connection serving the same
/// tenant as before is not told again: one tenant's traffic pays no round trip for the wall.
/// Connection ids count from zero in every pool, so the record is the pool's own: registered
/// when ``DatabasePool`` makes the pool and dropped when the pool stops. A pool made elsewhere
/// (a test's, a one-off admin statement's) has no record, and each statement sets its scope.
/// The setting is the session's (`set_config(…, false)`), sent as a statement of its own and
/// never inside a transaction (a rolled-back transaction would undo it behind this record).
final class ConnectionScopes: Sendable {
    private struct Owner { weak var client: PostgresClient? }
    private static let pools = Mutex<[ObjectIdentifier: ConnectionScopes]>([:])
    private let given = Mutex<[PostgresConnection.ID: String]>([:])
    /// The pool this record is of: another pool made later at the same address (one whose
    /// record was never dropped) is not taken for it.
    private let owner: Mutex<Owner>
    /// `BROKER_DB_TENANT_SCOPE=transaction`: the scope goes in a transaction around each
    /// statement, and nothing is recorded (behind a pooler in transaction mode, the next
    /// statement may run on another server connection).
    let perTransaction: Bool
    /// What each transaction sets beside its scope (``DatabaseConfiguration/transactionSettings``).
    let transactionSettings: [(String, String)]
    /// `BROKER_DB_PREPARED_STATEMENTS=unnamed`: the pool's prepared statements are sent unnamed
    /// (``PostgresClient/rows(_:logger:function:)``), and no connection prepares one.
    let namedStatements: Bool

    private init(_ client: PostgresClient, configuration: DatabaseConfiguration) {
        owner = Mutex(Owner(client: client))
        self.perTransaction = configuration.tenantScopePerTransaction
        self.transactionSettings = configuration.transactionSettings
        self.namedStatements = configuration.namedStatements
    }

    static func register(_ client: PostgresClient, configuration: DatabaseConfiguration) {
        pools.withLock { $0[ObjectIdentifier(client)] = ConnectionScopes(client, configuration: configuration) }
    }

    static func unregister(_ client: PostgresClient) {
        _ = pools.withLock { $0.removeValue(forKey: ObjectIdentifier(client)) }
    }

    static func of(_ client: PostgresClient) -> ConnectionScopes? {
        guard let record = pools.withLock({ $0[ObjectIdentifier(client)] }) else { return nil }
        return record.owner.withLock { $0.client === client } ? record : nil
    }

    func current(_ connection: PostgresConnection) -> String? {
        given.withLock { $0[connection.id] }
    }

    func record(_ setting: String?, for connection: PostgresConnection) {
        given.withLock { $0[connection.id] = setting }
    }

    /// The prepared statements each connection has executed (so PostgresNIO has prepared them
    /// there): only those may have a statement written behind them (``Pipelining``). Kept for
    /// PostgresNIO 1.33.2's order of a first execution (docs/upstream.md, "A prepared statement
    /// overtaken"); goes with ``Pipelining/prepared(_:)``'s first run alone.
    private let prepared = Mutex<[PostgresConnection.ID: Set<ObjectIdentifier>]>([:])

    func hasPrepared(_ statement: ObjectIdentifier, on connection: PostgresConnection) -> Bool {
        prepared.withLock { $0[connection.id]?.contains(statement) == true }
    }

    func notePrepared(_ statement: ObjectIdentifier, on connection: PostgresConnection) {
        _ = prepared.withLock { $0[connection.id, default: []].insert(statement) }
    }
}

extension PostgresClient {
    /// Gives `connection`, one of this pool's, the task's ``TenantScope`` (or `scope`) for its
    /// session, unless it has it already. Call before a statement or `BEGIN`, never inside a
    /// transaction.
    func enterTenantScope(
        on connection: PostgresConnection, _ scope: TenantScope? = TenantScope.current, logger: Logger
    ) async throws {
        try await Self.enterTenantScope(on: connection, scope, record: ConnectionScopes.of(self), logger: logger)
    }

    /// The same with the pool's record looked up already (once per statement on the hot path).
    static func enterTenantScope(
        on connection: PostgresConnection, _ scope: TenantScope?, record: ConnectionScopes?, logger: Logger
    ) async throws {
        let setting = TenantScope.setting(scope)
        let record = record.flatMap { $0.perTransaction ? nil : $0 }
        if let record, record.current(connection) == setting { return }
        record?.record(nil, for: connection)
        _ = try await connection.query("SELECT set_config('broker.tenant_id', \(setting), false)", logger: logger).collect()
        record?.record(setting, for: connection)
    }

    /// Runs `body` (one statement, or statements that need no transaction together) on a
    /// connection in the task's scope: given to the connection first, or, per transaction,
    /// inside a transaction of its own whose first statement sets it. Errors are the body's
    /// own (not wrapped in a transaction error).
    ///
    /// `writes`: the body changes rows, and its result is returned only once they are committed
    /// (decision 0056). Outside a transaction PostgreSQL commits a statement at the protocol's
    /// `Sync`, after the statement's rows and `CommandComplete`, which is when PostgresNIO hands
    /// them over; a commit that fails there (the backend terminated in between, a deferred
    /// constraint) would otherwise leave a success for a write that was rolled back. One more
    /// statement on the same connection confirms it: the server reaches it only after the
    /// commit, and a failed commit closes the connection, which fails it. Per transaction, the
    /// `COMMIT` itself confirms. Seen with PostgresNIO 1.33.2; when the confirmation may go:
    /// ``PostgresConnection/confirmCommitted(logger:)`` (docs/upstream.md, "Commit after the rows").
    ///
    /// `pipelining`: `body` writes one statement as its first step and only reads its answer
    /// after that (PostgresNIO's `execute` or `query`, then the rows), so the confirmation is
    /// written right behind it, not after its answer (``PostgresConnection/committed(_:logger:)``).
    ///
    /// Per transaction, `BEGIN`, `COMMIT` and `ROLLBACK` are written here rather than through
    /// PostgresNIO's `withTransaction`, which (1.33.2) wraps whatever the body throws in
    /// `PostgresTransactionError`: a caller catches the same errors in both scope modes. A
    /// design choice upstream, not a defect (docs/upstream.md, "Transaction errors wrapped"); this
    /// can go if `Benchmarks/upstream`'s `repro-transaction-error` exits 1 (the closure's own
    /// error comes through) or every caller unwraps `PostgresTransactionError`.
    func withScopedStatement<Result: Sendable>(
        writes: Bool, pipelining: Pipelining = .no, logger: Logger, isolation: isolated (any Actor)? = #isolation,
        _ body: @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await withScopedStatement(
            record: ConnectionScopes.of(self), writes: writes, pipelining: pipelining, logger: logger, isolation: isolation, body)
    }

    /// The same with the pool's record looked up already (once per statement on the hot path).
    func withScopedStatement<Result: Sendable>(
        record: ConnectionScopes?, writes: Bool, pipelining: Pipelining = .no, logger: Logger,
        isolation: isolated (any Actor)? = #isolation, _ body: @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await withOpenConnection(isolation: isolation) { connection in
            guard record?.perTransaction == true else {
                try await Self.enterTenantScope(on: connection, TenantScope.current, record: record, logger: logger)
                guard writes else { return try await body(connection) }
                if pipelining.applies(record: record, connection: connection) {
                    return try await connection.committed(
                        { try await body(connection) }, named: record?.namedStatements ?? true, logger: logger)
                }
                let result = try await body(connection)
                try await connection.confirmCommitted(named: record?.namedStatements ?? true, logger: logger)
                if case .prepared(let statement) = pipelining { record?.notePrepared(statement, on: connection) }
                return result
            }
            try await connection.query("BEGIN", logger: logger)
            do {
                try await connection.setTransactionTenantScope(settings: record?.transactionSettings ?? [], logger: logger)
                let result = try await body(connection)
                try await connection.query("COMMIT", logger: logger)
                return result
            } catch {
                _ = try? await connection.query("ROLLBACK", logger: logger)
                throw error
            }
        }
    }
}

extension PostgresConnection {
    /// Sets the task's ``TenantScope`` for the transaction under way (`set_config(…, true)`),
    /// and `settings` with it in the same statement (``DatabaseConfiguration/transactionSettings``:
    /// the statement timeout and the planner's settings, when no connection started with them).
    func setTransactionTenantScope(
        _ scope: TenantScope? = TenantScope.current, settings: [(String, String)] = [], logger: Logger
    ) async throws {
        var query: PostgresQuery = "SELECT set_config('broker.tenant_id', \(TenantScope.setting(scope)), true)"
        for (name, value) in settings {
            var binds = query.binds
            binds.append(name, context: .default)
            binds.append(value, context: .default)
            let count = binds.count
            query = PostgresQuery(unsafeSQL: query.sql + ", set_config($\(count - 1), $\(count), true)", binds: binds)
        }
        _ = try await self.query(query, logger: logger).collect()
    }
}

extension Database {
    /// Whether the tenant wall applies to the role this pool connects as: false for a superuser
    /// or a role with `BYPASSRLS`, which see every tenant's rows whatever the scope.
    public func tenantWallApplies() async throws -> Bool {
        let rows = try await client.rows(
            "SELECT NOT (rolsuper OR rolbypassrls) FROM pg_roles WHERE rolname = current_user", logger: logger)
        return try rows.first?.decode(Bool.self) ?? false
    }
}

import Foundation
import Logging
import PostgresNIO
import Synchronization

/// Whose rows the statements of the current task may see: the tenant wall (decision 0055).
/// Every table that holds a tenant's rows has forced row-level security with a policy on the
/// setting `broker.tenant_id` (migration 0028): a tenant's id shows that tenant's rows, `*`
/// shows every tenant's, and no setting shows none. The scope travels with the task (a task
/// local), and each statement's connection takes it on before the statement runs
/// (``PostgresClient/enterTenantScope(on:_:logger:)``): a request authenticated by a tenant's
/// API key runs in that tenant's scope, so a statement that forgot its tenant filter finds
/// nothing of another tenant. Work that crosses tenants by design (finding an API key by its
/// hash, a callback's state, the workers that serve every tenant) says so with
/// ``acrossTenants(because:_:)``. Roles that bypass row-level security (superusers, the owner
/// of an embedded cluster) see every row whatever the scope.
public enum TenantScope: Sendable, Equatable {
    case tenant(UUID)
    case allTenants

    /// Where the current task's scope comes from: set for a block of work, or settled once
    /// during a request (``RequestTenantScope``). The innermost binding counts.
    enum Binding: Sendable {
        case fixed(TenantScope?)
        case request(RequestTenantScope)
    }

    @TaskLocal static var binding: Binding?

    /// The scope statements of the current task run in; nil: none (they see no tenant's rows).
    public static var current: TenantScope? {
        switch binding {
        case .fixed(let scope): scope
        case .request(let request): request.scope
        case nil: nil
        }
    }

    /// Runs `body` with statements limited to `tenantID`'s rows.
    public static func tenant<T>(
        _ tenantID: UUID, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T
    ) async rethrows -> T {
        try await $binding.withValue(.fixed(.tenant(tenantID)), operation: body, isolation: isolation)
    }

    /// Runs `body` with statements that see every tenant's rows. `reason` says why the work
    /// crosses tenants; it is there for the reader (the wall is only as good as these).
    public static func acrossTenants<T>(
        because reason: StaticString, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T
    ) async rethrows -> T {
        try await $binding.withValue(.fixed(.allTenants), operation: body, isolation: isolation)
    }

    /// Runs `body` in `scope` (nil: no tenant's rows).
    public static func with<T>(
        _ scope: TenantScope?, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T
    ) async rethrows -> T {
        try await $binding.withValue(.fixed(scope), operation: body, isolation: isolation)
    }

    /// Runs the request `body` with no scope until ``RequestTenantScope/settle(_:)`` names its
    /// tenant (once its API key, or the state a callback carries, is known).
    public static func request<T>(isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T) async rethrows -> T {
        try await $binding.withValue(.request(RequestTenantScope()), operation: body, isolation: isolation)
    }

    /// Runs `body` in the scope of the one tenant every id in `tenantIDs` names, or across
    /// tenants when they name several: a batch of one tenant's work (every batch, where one
    /// tenant is served) keeps its connections in that tenant's scope.
    public static func shared<T>(
        by tenantIDs: some Sequence<UUID>, because reason: StaticString, isolation: isolated (any Actor)? = #isolation,
        _ body: () async throws -> T
    ) async rethrows -> T {
        var iterator = tenantIDs.makeIterator()
        if let first = iterator.next() {
            var single = true
            while single, let next = iterator.next() { single = next == first }
            if single { return try await tenant(first, isolation: isolation, body) }
        }
        return try await acrossTenants(because: reason, isolation: isolation, body)
    }

    /// The value of `broker.tenant_id` for `scope`: nil (no scope) is the empty string, which
    /// the policies read as "no tenant".
    static func setting(_ scope: TenantScope?) -> String {
        switch scope {
        case .tenant(let id): id.uuidString.lowercased()
        case .allTenants: "*"
        case nil: ""
        }
    }
}

/// The scope of one request, settled once its tenant is known: by the API key's
/// authentication, or by what a public route's callback carries. Settled once: a second,
/// different tenant is refused (a request never serves two tenants).
public final class RequestTenantScope: Sendable {
    private let settled = Mutex<TenantScope?>(nil)

    var scope: TenantScope? { settled.withLock { $0 } }

    /// Names the tenant of the request running now, if it runs in a request scope. Returns
    /// false (and changes nothing) when the request has settled on another tenant already.
    @discardableResult
    public static func settle(_ tenantID: UUID) -> Bool {
        guard case .request(let request) = TenantScope.binding else { return true }
        return request.settled.withLock { settled in
            if let settled { return settled == .tenant(tenantID) }
            settled = .tenant(tenantID)
            return true
        }
    }
}

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

    private init(_ client: PostgresClient, perTransaction: Bool) {
        owner = Mutex(Owner(client: client))
        self.perTransaction = perTransaction
    }

    static func register(_ client: PostgresClient, perTransaction: Bool = false) {
        pools.withLock { $0[ObjectIdentifier(client)] = ConnectionScopes(client, perTransaction: perTransaction) }
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
}

extension PostgresClient {
    /// Whether this pool sets the scope inside a transaction around each statement.
    var tenantScopePerTransaction: Bool { ConnectionScopes.of(self)?.perTransaction ?? false }

    /// Gives `connection`, one of this pool's, the task's ``TenantScope`` (or `scope`) for its
    /// session, unless it has it already. Call before a statement or `BEGIN`, never inside a
    /// transaction.
    func enterTenantScope(
        on connection: PostgresConnection, _ scope: TenantScope? = TenantScope.current, logger: Logger
    ) async throws {
        let setting = TenantScope.setting(scope)
        let record = ConnectionScopes.of(self).flatMap { $0.perTransaction ? nil : $0 }
        if let record, record.current(connection) == setting { return }
        record?.record(nil, for: connection)
        _ = try await connection.query("SELECT set_config('broker.tenant_id', \(setting), false)", logger: logger).collect()
        record?.record(setting, for: connection)
    }

    /// Runs `body` (one statement, or statements that need no transaction together) on a
    /// connection in the task's scope: given to the connection first, or, per transaction,
    /// inside a transaction of its own whose first statement sets it. Errors are the body's
    /// own (not wrapped in a transaction error).
    func withScopedStatement<Result: Sendable>(
        logger: Logger, isolation: isolated (any Actor)? = #isolation, _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await withConnection(isolation: isolation) { connection in
            guard tenantScopePerTransaction else {
                try await enterTenantScope(on: connection, logger: logger)
                return try await body(connection)
            }
            try await connection.query("BEGIN", logger: logger)
            do {
                try await connection.setTransactionTenantScope(logger: logger)
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
    /// Sets the task's ``TenantScope`` for the transaction under way (`set_config(…, true)`).
    func setTransactionTenantScope(_ scope: TenantScope? = TenantScope.current, logger: Logger) async throws {
        _ = try await query("SELECT set_config('broker.tenant_id', \(TenantScope.setting(scope)), true)", logger: logger).collect()
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

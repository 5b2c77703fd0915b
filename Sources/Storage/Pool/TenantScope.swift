import Foundation
import Synchronization

/// Whose rows the statements of the current task may see: the tenant wall (decision 0055).
/// Every table that holds a tenant's rows has forced row-level security with a policy on the
/// setting `broker.tenant_id` (migration 0028): a tenant's id shows that tenant's rows, `*`
/// shows every tenant's, and no setting shows none. The scope travels with the task (a task
/// local), and each statement's connection takes it on before the statement runs
/// (``ConnectionScopes``): a request authenticated by a tenant's
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

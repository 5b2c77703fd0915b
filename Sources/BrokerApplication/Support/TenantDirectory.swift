import BrokerCore
import Foundation
import Storage

/// The tenants by slug, for the routes that name their tenant in the path (discovery, the
/// OpenID Provider's endpoints), and by id, for a relying party's sign-in at the provider's
/// callback (whose state names its tenant by id): read from the database at most once per ``ttl`` per slug, and
/// dropped when a tenant changes (the `tenants` cache topic, decision 0062; a read a change
/// notice overtook is not kept).
package struct TenantDirectory: Sendable {
    package static let ttl: Duration = .seconds(5)
    let database: Database
    let cache: ExpiringCache<String, Tenant?>
    let byID: ExpiringCache<UUID, Tenant?>

    package init(
        database: Database, cache: ExpiringCache<String, Tenant?> = ExpiringCache(ttl: ttl),
        byID: ExpiringCache<UUID, Tenant?> = ExpiringCache(ttl: ttl)
    ) {
        self.database = database
        self.cache = cache
        self.byID = byID
    }

    /// The tenant of `slug`, or nil (a text that cannot be a slug is never sent to PostgreSQL).
    package func tenant(slug: String) async throws -> Tenant? {
        guard (try? TenantSlug(slug)) != nil else { return nil }
        return try await cache.value(for: slug) { try await database.tenants.find(slug: slug) }
    }

    /// The tenant of `id`, or nil.
    package func tenant(id: UUID) async throws -> Tenant? {
        try await byID.value(for: id) { try await database.tenants.find(id: id) }
    }

    package func invalidate() {
        cache.removeAll()
        byID.removeAll()
    }
}

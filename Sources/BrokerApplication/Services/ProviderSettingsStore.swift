import BrokerCore
import Foundation
import Providers
import Storage

/// The tenant configuration providers read on the sign-in path, from the database through
/// short-lived caches that LISTEN/NOTIFY clears when an operator changes them.
package struct ProviderSettingsStore: ProviderConfigurationStore {
    package let database: Database
    /// (tenant, client id) → client, group and team.
    package let appleClients: ExpiringCache<String, ResolvedAppleClient>
    /// tenant → its Services IDs (the web flow's candidates when the request names none).
    package let appleServiceClients: ExpiringCache<UUID, [AppleClient]>
    /// (tenant, provider) → settings; a cached miss is `.some(nil)`.
    package let configurations: ExpiringCache<String, ProviderConfiguration?>

    package init(
        database: Database, appleClients: ExpiringCache<String, ResolvedAppleClient>,
        appleServiceClients: ExpiringCache<UUID, [AppleClient]>, configurations: ExpiringCache<String, ProviderConfiguration?>
    ) {
        self.database = database
        self.appleClients = appleClients
        self.appleServiceClients = appleServiceClients
        self.configurations = configurations
    }

    /// The key of `name` (a client id or a provider id) of a tenant in either cache. Invalidation
    /// drops every key that starts with `cacheKeyPrefix(tenantID)`, so both are built here.
    package static func cacheKey(_ tenantID: UUID, _ name: String) -> String { cacheKeyPrefix(tenantID) + name }

    package static func cacheKeyPrefix(_ tenantID: UUID) -> String { tenantID.lowercasedString + ":" }

    package func appleClient(tenantID: UUID, clientID: String) async throws -> ResolvedAppleClient? {
        let key = Self.cacheKey(tenantID, clientID)
        if let cached = appleClients.value(for: key) { return cached }
        let generation = appleClients.generation
        guard let resolved = try await database.apple.resolve(tenantID: tenantID, clientID: clientID) else { return nil }
        appleClients.set(resolved, for: key, unlessClearedSince: generation)
        return resolved
    }

    /// Read on every web sign-in's start that names no Services ID (every OpenID Provider
    /// authorization request sent to Apple), so cached like ``appleClient(tenantID:clientID:)``.
    package func appleServiceClients(tenantID: UUID) async throws -> [AppleClient] {
        if let cached = appleServiceClients.value(for: tenantID) { return cached }
        let generation = appleServiceClients.generation
        let services = try await database.apple.clients(tenantID: tenantID).filter { $0.kind == .service }
        appleServiceClients.set(services, for: tenantID, unlessClearedSince: generation)
        return services
    }

    package func configuration(tenantID: UUID, provider: ProviderID) async throws -> ProviderConfiguration? {
        let key = Self.cacheKey(tenantID, provider.rawValue)
        if let cached = configurations.value(for: key) { return cached }
        let generation = configurations.generation
        let found = try await database.providerConfigs.find(tenantID: tenantID, provider: provider)
        configurations.set(found, for: key, unlessClearedSince: generation)
        return found
    }

    /// The type of the tenant's provider `id`: a reserved id is its own type; any other is the
    /// tenant's configuration's. An id the tenant never configured is unknown, whatever other
    /// tenants configured (no tenant learns another's ids).
    package func registered(_ id: ProviderID, tenantID: UUID, in providers: ProviderRegistry) async throws -> ProviderRegistry.Registered {
        let type: ProviderType
        if let reserved = id.reservedType {
            type = reserved
        } else {
            guard let configuration = try await configuration(tenantID: tenantID, provider: id) else {
                throw SignInFailure.unknownProvider(id.rawValue)
            }
            type = configuration.type
        }
        guard let registered = providers[type] else { throw SignInFailure.unknownProvider(id.rawValue) }
        return registered
    }
}

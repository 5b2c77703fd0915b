import BrokerApplication
import BrokerCore
import Foundation
import PostgresNIO
import Providers
import Storage
import Testing

/// What a LISTEN/NOTIFY message drops from the caches of the sign-in path: the changed tenant's
/// entries at once (not at their TTL), and no other tenant's.
@Suite struct CacheInvalidationTests {
    @Test func aProviderChangeDropsThatTenantsCachedSettingsAndKeepsOthers() async throws {
        try await TestApp.run { app, _ in
            let acme = try await app.createTenant("acme").id
            let bravo = try await app.createTenant("bravo").id
            let services = app.services
            let google = try #require(ProviderID(rawValue: "google"))
            // The listener drops every cache when it starts: a read it overtakes is not kept.
            try await services.invalidationsListening.value
            // Both tenants' (absent) google settings are read once and cached as misses.
            for tenant in [acme, bravo] {
                _ = try await services.providerSettings.configuration(tenantID: tenant, provider: google)
                #expect(services.providerConfigurations.value(for: ProviderSettingsStore.cacheKey(tenant, "google")) != nil)
            }
            await services.invalidate(.providerConfigs, tenantID: acme)
            #expect(services.providerConfigurations.value(for: ProviderSettingsStore.cacheKey(acme, "google")) == nil, "dropped at once")
            #expect(
                services.providerConfigurations.value(for: ProviderSettingsStore.cacheKey(bravo, "google")) != nil,
                "another tenant's is kept")
            await services.invalidate(.providerConfigs, tenantID: nil)
            #expect(
                services.providerConfigurations.value(for: ProviderSettingsStore.cacheKey(bravo, "google")) == nil,
                "a change without a tenant drops all")
        }
    }

    /// The tenants by slug (the OpenID Provider's endpoints): a tenant's change drops them, so a
    /// disabled tenant's endpoints refuse at once, and a read a change overtook is not kept.
    @Test func aTenantChangeDropsTheTenantsBySlug() async throws {
        try await TestApp.run { app, _ in
            _ = try await app.createTenant("acme")
            let services = app.services
            try await services.invalidationsListening.value
            #expect(try await services.tenantDirectory.tenant(slug: "acme")?.status == .active)
            #expect(try await services.tenantDirectory.tenant(slug: "nobody") == nil)
            #expect(try await services.tenantDirectory.tenant(slug: "Not a slug/") == nil)
            _ = try await app.database.client.query("UPDATE tenants SET status = 'disabled' WHERE slug = 'acme'")
            #expect(try await services.tenantDirectory.tenant(slug: "acme")?.status == .active, "cached until a change notice")
            await services.invalidate(.tenants, tenantID: nil)
            #expect(try await services.tenantDirectory.tenant(slug: "acme")?.status == .disabled, "read again after the notice")
        }
    }
}

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

    /// The relying parties (the token endpoint authenticates one per request): cached, so a
    /// change in the table alone is not seen; a client change's notice drops that tenant's
    /// clients at once (a rotated secret or a removed client stops working), not another's.
    @Test func aClientChangeDropsThatTenantsClients() async throws {
        try await TestApp.run { app, _ in
            let acme = try await app.createTenant("acme").id
            let bravo = try await app.createTenant("bravo").id
            let services = app.services
            try await services.invalidationsListening.value
            let admin = ClientAdmin(database: app.database, actor: "test")
            let web = try await admin.create(
                tenant: "acme", name: "web", redirectURIs: ["https://app.example.com/cb"], isPublic: false, allowLoopback: false)
            let other = try await admin.create(
                tenant: "bravo", name: "web", redirectURIs: ["https://b.example.com/cb"], isPublic: false, allowLoopback: false)
            let directory = services.clientDirectory
            let id = web.client.clientID
            #expect(try await directory.authenticate(tenantID: bravo, clientID: id, presentedSecret: web.secret) == nil, "another tenant's")
            #expect(try await directory.registered(tenantID: acme, clientID: "not a client id") == nil)
            _ = try await directory.registered(tenantID: bravo, clientID: other.client.clientID)
            // Read and cached right before the change (the cache's five seconds run on the real
            // clock: the reads above once took longer than that on a loaded machine).
            #expect(try await directory.authenticate(tenantID: acme, clientID: id, presentedSecret: web.secret)?.clientID == id)
            #expect(try await directory.authenticate(tenantID: acme, clientID: id, presentedSecret: "ibcs_wrong") == nil)
            #expect(try await directory.authenticate(tenantID: acme, clientID: id, presentedSecret: nil) == nil, "a secret is required")
            _ = try await app.database.client.query("UPDATE oauth_clients SET secret_hash = sha256('other') WHERE client_id = \(id)")
            #expect(
                try await directory.authenticate(tenantID: acme, clientID: id, presentedSecret: web.secret)?.clientID == id,
                "cached until a change notice")
            await services.invalidate(.oauthClients, tenantID: acme)
            #expect(try await directory.authenticate(tenantID: acme, clientID: id, presentedSecret: web.secret) == nil, "read again")
            // Not removed by the other tenant's notice (stored, whether or not its time ran out).
            #expect(directory.cache.holds(.init(tenantID: bravo, clientID: other.client.clientID)), "another tenant's kept")

            // Every change to a client sends the notice, in its transaction.
            let notices = AsyncStream<String>.makeStream()
            let listening = AsyncStream<Void>.makeStream()
            let listener = Task {
                await app.database.listenForInvalidations(listening: { listening.continuation.yield() }) { topic, tenantID in
                    if let tenantID { notices.continuation.yield("\(topic.rawValue):\(tenantID.lowercasedString)") }
                }
            }
            defer { listener.cancel() }
            let seen = try await withDeadline(.seconds(30)) {
                var ready = listening.stream.makeAsyncIterator()
                _ = await ready.next()
                var iterator = notices.stream.makeAsyncIterator()
                _ = try await admin.rotateSecret(tenant: "bravo", clientID: other.client.clientID)
                let rotated = await iterator.next()
                _ = try await admin.remove(tenant: "bravo", clientID: other.client.clientID)
                return [rotated, await iterator.next()]
            }
            #expect(seen == Array(repeating: "oauth_clients:\(bravo.lowercasedString)", count: 2))
        }
    }

    /// A tenant's Services IDs (the web flow's candidates when a start or an OpenID Provider
    /// authorization request names none, read on each such request): cached, so a change in the
    /// table alone is not seen, and read again once an Apple client change's notice dropped
    /// them. The store is given caches of its own, which no notice of the app's listener
    /// clears behind the test's back; the app's own cache is dropped by the notice's topic.
    @Test func anAppleClientChangeDropsThatTenantsServicesIDs() async throws {
        try await TestApp.run { app, _ in
            let acme = try await app.createTenant("acme").id
            let admin = AppleAdmin(database: app.database, actor: "test")
            _ = try await admin.setTeam(
                tenant: "acme", teamID: "TEAM000001", keyID: "KEY0000001", p8PEM: ProviderTestSetup.p8PEM, secrets: app.secrets)
            _ = try await admin.addGroup(tenant: "acme", primaryAppID: "com.acme.app")
            _ = try await admin.addClient(
                tenant: "acme", group: "com.acme.app", clientID: "com.acme.web", kind: .service, nonceMode: .sha256,
                redirectURIs: ["https://acme.example.com/apple/callback"], returnURLs: ["https://acme.example.com/done"])
            let cache = ExpiringCache<UUID, [AppleClient]>(ttl: .seconds(3_600))
            let store = ProviderSettingsStore(
                database: app.services.database, appleClients: ExpiringCache(ttl: .seconds(3_600)), appleServiceClients: cache,
                configurations: ExpiringCache(ttl: .seconds(3_600)))
            // Each Services ID with its return URLs.
            func services() async throws -> [String] {
                try await TenantScope.tenant(acme) {
                    try await store.appleServiceClients(tenantID: acme).map { ([$0.clientID] + $0.returnURLs).joined(separator: " ") }
                }
            }
            #expect(try await services() == ["com.acme.web https://acme.example.com/done"], "the App ID is not one")
            _ = try await app.database.client.query(
                "UPDATE apple_clients SET return_urls = '{https://acme.example.com/other}' WHERE client_id = 'com.acme.web'")
            #expect(try await services() == ["com.acme.web https://acme.example.com/done"], "cached until a change notice")
            cache.removeAll()
            #expect(try await services() == ["com.acme.web https://acme.example.com/other"], "read again once dropped")

            // The app's cache, as its listener hands a notice over.
            let served = app.services
            let other = UUID()
            served.appleServiceClients.set([], for: acme)
            served.appleServiceClients.set([], for: other)
            await served.invalidate(.appleClients, tenantID: acme)
            #expect(served.appleServiceClients.value(for: acme) == nil, "that tenant's dropped")
            #expect(served.appleServiceClients.value(for: other) != nil, "another tenant's kept")
            await served.invalidate(.appleClients, tenantID: nil)
            #expect(served.appleServiceClients.value(for: other) == nil, "a change without a tenant drops all")
        }
    }
}

import BrokerCore
import Crypto
import Foundation
import JWTKit
import Storage

/// Each tenant's signing keys, decrypted once and held in memory as a jwt-kit key collection
/// (published keys only: `next`, `active`, recently retired). Reloaded from PostgreSQL after
/// `ttl`, so rotations made by any instance or by the CLI reach every instance within it;
/// key states themselves follow the clock (see ``SigningKeyRing``). `now` is the wall clock key
/// states are read at when loading, `clock` the one the reload interval runs on (tests move
/// both instead of waiting).
package actor TenantSigningKeys {
    package struct Entry: Sendable {
        package let ring: SigningKeyRing
        package let collection: JWTKeyCollection
    }

    package let database: Database
    package let secrets: SecretBox
    package let ttl: Duration
    package let now: @Sendable () -> Date
    package let clock: @Sendable () -> ContinuousClock.Instant
    /// Fresh entries, read without entering the actor (every sign-in signs a token); a load
    /// that an invalidation overtook is used once, not stored (``ExpiringCache``'s generation).
    private nonisolated let cache: ExpiringCache<UUID, Entry>
    /// Loads under way, each with the generation it started in: a request after an
    /// invalidation starts its own rather than wait for one that may predate the change.
    private var loading: [UUID: (generation: UInt64, task: Task<Entry, any Error>)] = [:]

    package init(
        database: Database, secrets: SecretBox, ttl: Duration = .seconds(30), now: @escaping @Sendable () -> Date = { Date() },
        clock: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) {
        self.database = database
        self.secrets = secrets
        self.ttl = ttl
        self.now = now
        self.clock = clock
        self.cache = ExpiringCache(ttl: ttl, capacity: 100_000, now: clock)
    }

    /// The collection and the kid of the key that signs now.
    package nonisolated func signer(for tenant: Tenant, now: Date = Date()) async throws -> (JWTKeyCollection, kid: String) {
        let entry = try await entry(for: tenant)
        guard let active = entry.ring.active(at: now) else { throw BrokerError.noActiveSigningKey(tenant.slug) }
        return (entry.collection, active.kid)
    }

    /// The collection holding every published key, for verifying broker tokens.
    package nonisolated func verifier(for tenant: Tenant) async throws -> JWTKeyCollection {
        try await entry(for: tenant).collection
    }

    package nonisolated func invalidate(_ tenantID: UUID) { cache.removeAll { key, _ in key == tenantID } }

    package nonisolated func invalidateAll() { cache.removeAll() }

    private nonisolated func entry(for tenant: Tenant) async throws -> Entry {
        if let entry = cache.value(for: tenant.id) { return entry }
        return try await reload(tenant)
    }

    /// Loads the tenant's keys once however many requests ask at the same time.
    private func reload(_ tenant: Tenant) async throws -> Entry {
        if let entry = cache.value(for: tenant.id) { return entry }
        let generation = cache.generation
        if let underway = loading[tenant.id], underway.generation == generation { return try await underway.task.value }
        let task = Task { try await TenantScope.tenant(tenant.id) { try await load(tenant) } }
        loading[tenant.id] = (generation, task)
        defer { if loading[tenant.id]?.generation == generation { loading[tenant.id] = nil } }
        let entry = try await task.value
        cache.set(entry, for: tenant.id, unlessClearedSince: generation)
        return entry
    }

    private func load(_ tenant: Tenant) async throws -> Entry {
        let ring = SigningKeyRing(try await database.signingKeys.list(tenantID: tenant.id))
        let collection = JWTKeyCollection()
        let serializer = DefaultJWTSerializer(jsonEncoder: AccessTokenJSONEncoder())
        for status in ring.published(at: now()) {
            let record = status.record
            let raw = try secrets.open(
                record.sealedPrivateKey, context: SigningKeyRecord.sealingContext(tenantID: tenant.id, kid: record.kid),
                what: "signing key \(record.kid)")
            let key = try ES256PrivateKey(backing: try P256.Signing.PrivateKey(rawRepresentation: raw))
            await collection.add(ecdsa: key, kid: JWKIdentifier(string: record.kid), serializer: serializer)
        }
        return Entry(ring: ring, collection: collection)
    }
}

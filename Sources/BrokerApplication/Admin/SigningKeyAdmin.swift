import BrokerCore
import Foundation
import Storage

/// Rotation of a tenant's ES256 session-token signing keys.
public struct SigningKeyAdmin: Sendable {
    package let database: Database
    package let secrets: SecretBox
    package let actor: String

    public init(database: Database, secrets: SecretBox, actor: String) {
        self.database = database
        self.secrets = secrets
        self.actor = actor
    }

    /// Creates a new key. With no key signing yet it is active at once; otherwise it is
    /// published as `next` and starts signing after `delay` seconds (default: the tenant's
    /// setting, 10 minutes), so resource servers have it cached before it signs.
    public func rotate(tenant slug: String, delay: Int? = nil, now: Date = Date()) async throws -> SigningKeyStatus {
        let tenant = try await TenantAdmin.find(slug, in: database)
        if let delay, delay < 0 { throw BrokerError.invalidArgument("The activation delay cannot be negative.") }
        let ring = SigningKeyRing(try await database.signingKeys.list(tenantID: tenant.id))
        let hasActive = ring.active(at: now) != nil
        let activatesAt = hasActive ? now.addingTimeInterval(TimeInterval(delay ?? tenant.keyActivationDelay)) : now
        let key = try Self.makeKey(tenantID: tenant.id, activatesAt: activatesAt, secrets: secrets, now: now)
        try await database.signingKeys.insert(key, actor: actor)
        let state: SigningKeyState = activatesAt > now ? .next : .active
        return SigningKeyStatus(record: key, state: state, retiredSince: nil)
    }

    public func list(tenant slug: String, now: Date = Date()) async throws -> [SigningKeyStatus] {
        let tenant = try await TenantAdmin.find(slug, in: database)
        return SigningKeyRing(try await database.signingKeys.list(tenantID: tenant.id)).statuses(at: now)
    }

    /// Retires a key. Retiring the active key promotes the pending `next` key at once; with
    /// no `next` key it is refused, since the tenant could no longer sign.
    public func retire(tenant slug: String, kid: String, now: Date = Date()) async throws -> [SigningKeyStatus] {
        let tenant = try await TenantAdmin.find(slug, in: database)
        let statuses = SigningKeyRing(try await database.signingKeys.list(tenantID: tenant.id)).statuses(at: now)
        guard let target = statuses.first(where: { $0.record.kid == kid }) else {
            throw BrokerError.signingKeyNotFound(kid)
        }
        var promote: (id: UUID, at: Date)?
        if target.state == .active {
            guard let next = statuses.last(where: { $0.state == .next }) else {
                throw BrokerError(
                    code: "last_signing_key", kind: .conflict, title: "Cannot retire the only signing key",
                    detail: "Key '\(kid)' is the only key that signs tokens for tenant '\(slug)'.",
                    hint:
                        "Run 'broker keys rotate --tenant \(slug)' first; retiring then promotes the new key at once (resource servers may not have cached it yet: prefer waiting for the delay)."
                )
            }
            promote = (next.record.id, now)
        }
        if target.state != .retired || target.record.retiredAt == nil {
            try await database.signingKeys.update(
                tenantID: tenant.id, retire: (target.record.id, now), activate: promote, actor: actor, target: kid)
        }
        // The ring as of just after the change: PostgreSQL keeps microseconds and the round trip
        // through a Double can bring `now` back one ulp later, which read at `now` itself showed
        // the retired key still active (a CI flake of the retire test).
        return SigningKeyRing(try await database.signingKeys.list(tenantID: tenant.id)).statuses(at: now.addingTimeInterval(0.001))
    }

    /// What a revocation did: the keys after it, and the key that signs from now on when the
    /// revoked key was the one signing (promoted from `next`, or created).
    public struct Revocation: Sendable {
        public let keys: [SigningKeyStatus]
        public let successor: SigningKeyStatus?
        public let alreadyRevoked: Bool
    }

    /// Revokes a compromised key: it leaves the JWKS at once on every instance and tokens it
    /// signed stop verifying (introspection says inactive); sessions stay and get tokens from the
    /// successor on refresh. Revoking the active key promotes the newest `next` key at once, or
    /// creates a key active at once when none is pending: the tenant never stops signing.
    public func revoke(tenant slug: String, kid: String, now: Date = Date()) async throws -> Revocation {
        let tenant = try await TenantAdmin.find(slug, in: database)
        let statuses = SigningKeyRing(try await database.signingKeys.list(tenantID: tenant.id)).statuses(at: now)
        guard let target = statuses.first(where: { $0.record.kid == kid }) else {
            throw BrokerError.signingKeyNotFound(kid)
        }
        if target.state == .revoked {
            return Revocation(keys: statuses, successor: nil, alreadyRevoked: true)
        }
        var promote: (id: UUID, at: Date)?
        var created: SigningKeyRecord?
        if target.state == .active {
            if let next = statuses.last(where: { $0.state == .next }) {
                promote = (next.record.id, now)
            } else {
                created = try Self.makeKey(tenantID: tenant.id, activatesAt: now, secrets: secrets, now: now)
            }
        }
        try await database.signingKeys.revoke(
            tenantID: tenant.id, id: target.record.id, at: now, activate: promote, insert: created, actor: actor, target: kid)
        // Read just after `now` (see `retire`).
        let keys = SigningKeyRing(try await database.signingKeys.list(tenantID: tenant.id)).statuses(at: now.addingTimeInterval(0.001))
        let successorID = promote?.id ?? created?.id
        return Revocation(keys: keys, successor: keys.first { $0.record.id == successorID }, alreadyRevoked: false)
    }

    package static func makeKey(tenantID: UUID, activatesAt: Date, secrets: SecretBox, now: Date) throws -> SigningKeyRecord {
        let material = SigningKeyMaterial.generate()
        let sealed = try secrets.seal(
            material.privateKey, context: SigningKeyRecord.sealingContext(tenantID: tenantID, kid: material.kid))
        return SigningKeyRecord(
            id: UUID(), tenantID: tenantID, kid: material.kid, algorithm: "ES256", publicKey: material.publicKey,
            sealedPrivateKey: sealed, createdAt: now, activatesAt: activatesAt, retiredAt: nil)
    }
}

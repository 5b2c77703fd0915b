import BrokerCore
import Foundation
import Storage

/// Operator actions on tenants, shared by the CLI and any future admin API.
public struct TenantAdmin: Sendable {
    package let database: Database
    package let actor: String

    public init(database: Database, actor: String) {
        self.database = database
        self.actor = actor
    }

    /// Creates the tenant with an active signing key.
    public func create(slug: String, name: String?, secrets: SecretBox, now: Date = Date()) async throws -> Tenant {
        let slug = try TenantSlug(slug)
        let displayName =
            (name?.trimmingCharacters(in: .whitespacesAndNewlines)).flatMap { $0.isEmpty ? nil : $0 }
            ?? slug.rawValue
        guard FreeText.fits(displayName, characters: 200) else {
            throw BrokerError.invalidArgument("The tenant name is longer than 200 characters (or 600 Unicode code points).")
        }
        try FreeText.require(displayName, option: "--name")
        let tenant = Tenant(
            id: UUID(), slug: slug, displayName: displayName, status: .active, session: .default, linking: .default,
            keyActivationDelay: 600, createdAt: now, updatedAt: now)
        let key = try SigningKeyAdmin.makeKey(tenantID: tenant.id, activatesAt: now, secrets: secrets, now: now)
        do {
            return try await database.tenants.create(tenant, firstKey: key, actor: actor)
        } catch StorageConflict.tenantExists(let existing) {
            throw BrokerError.tenantExists(existing)
        }
    }

    public func list() async throws -> [Tenant] {
        try await database.tenants.list()
    }

    public func find(_ slug: String) async throws -> Tenant {
        try await Self.find(slug, in: database)
    }

    /// Turns auto-linking by verified email on or off.
    public func setAutoLinkVerifiedEmail(_ slug: String, _ on: Bool) async throws -> Tenant {
        guard let tenant = try await database.tenants.setAutoLinkVerifiedEmail(slug: slug, on, actor: actor) else {
            throw BrokerError.tenantNotFound(slug)
        }
        return tenant
    }

    /// Sets the rate of the tenant's API keys (requests a second and burst, per key and per
    /// instance); nil returns them to the instance's default.
    public func setRateLimit(_ slug: String, _ limit: RateLimit?) async throws -> Tenant {
        if let limit {
            guard RateLimit.allowedRates.contains(limit.perSecond) else {
                throw BrokerError.invalidArgument("--rate-limit must be a whole number from 1 to 1000000 (requests a second).")
            }
            guard RateLimit.allowedBursts.contains(limit.burst), limit.burst >= limit.perSecond else {
                throw BrokerError.invalidArgument(
                    "--burst must be a whole number from the rate (\(limit.perSecond)) to 2000000.")
            }
        }
        guard let tenant = try await database.tenants.setRateLimit(slug: slug, limit, actor: actor) else {
            throw BrokerError.tenantNotFound(slug)
        }
        return tenant
    }

    /// Sets how many open sessions each of the tenant's accounts may have (a sign-in past it
    /// revokes the oldest).
    public func setMaxSessionsPerAccount(_ slug: String, _ cap: Int) async throws -> Tenant {
        guard SessionSettings.allowedMaxSessions.contains(cap) else {
            throw BrokerError.invalidArgument("--max-sessions-per-account must be a whole number from 1 to 10000.")
        }
        guard let tenant = try await database.tenants.setMaxSessionsPerAccount(slug: slug, cap, actor: actor) else {
            throw BrokerError.tenantNotFound(slug)
        }
        return tenant
    }

    public func setStatus(_ slug: String, _ status: TenantStatus) async throws -> Tenant {
        guard let tenant = try await database.tenants.setStatus(slug: slug, status, actor: actor) else {
            throw BrokerError.tenantNotFound(slug)
        }
        return tenant
    }
}

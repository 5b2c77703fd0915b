import BrokerCore
import Foundation
import Logging
import Metrics
import Storage
import Synchronization

/// Each tenant's ``LoginCatalog``, cached: `GET /v1/login-options` is called on every app launch
/// and sign-ins through a non-qualifying provider consult it. LISTEN/NOTIFY clears a tenant's
/// entry when its tenant row, Apple clients, provider settings or attestations change; entries
/// live at most 30 s regardless. What was read while a notice arrived is used once, not stored
/// (``ExpiringCache/set(_:for:unlessClearedSince:)``), and the tenant's policy is read with the
/// rest, never taken from the caller's cached tenant: either could otherwise keep a change from
/// showing for the full 30 s.
package final class LoginCatalogStore: Sendable {
    /// The longest an entry lives when no change notice clears it.
    package static let ttlSeconds = 30
    package let database: Database
    private let catalogs = ExpiringCache<UUID, LoginCatalog>(ttl: .seconds(ttlSeconds))
    /// Rendered `GET /v1/login-options` bodies by tenant and platform.
    private let renderedOptions = ExpiringCache<String, [UInt8]>(ttl: .seconds(ttlSeconds))
    /// When each tenant's violating sign-ins were last logged.
    private let lastLogged = Mutex<[UUID: ContinuousClock.Instant]>([:])

    package init(database: Database) {
        self.database = database
    }

    /// The `GET /v1/login-options` body of `tenant` on `platform`, as `render` writes it.
    package func renderedOptions(
        for tenant: Tenant, on platform: ProviderPlatform, render: (LoginOptions) -> [UInt8]
    ) async throws -> [UInt8] {
        let key = "\(tenant.id.lowercasedString):\(platform.rawValue)"
        if let cached = renderedOptions.value(for: key) { return cached }
        let generation = renderedOptions.generation
        let body = render(try await catalog(for: tenant).options(on: platform))
        renderedOptions.set(body, for: key, unlessClearedSince: generation)
        return body
    }

    package func catalog(for tenant: Tenant) async throws -> LoginCatalog {
        if let cached = catalogs.value(for: tenant.id) { return cached }
        let generation = catalogs.generation
        let database = database
        // The caller's tenant may be a cached copy from before a policy change.
        async let policy = database.loginPolicy.loginPolicy(for: try await database.tenants.find(id: tenant.id) ?? tenant)
        async let clients = database.apple.clients(tenantID: tenant.id)
        async let groups = database.apple.groups(tenantID: tenant.id)
        async let configurations = database.providerConfigs.list(tenantID: tenant.id)
        let catalog = LoginCatalog(
            policy: try await policy, appleClients: try await clients, primaryAppIDs: Set(try await groups.map(\.primaryAppID)),
            configurations: try await configurations)
        catalogs.set(catalog, for: tenant.id, unlessClearedSince: generation)
        return catalog
    }

    package func invalidate(tenantID: UUID?) {
        guard let tenantID else {
            catalogs.removeAll()
            renderedOptions.removeAll()
            return
        }
        catalogs.removeAll { key, _ in key == tenantID }
        renderedOptions.removeAll { key, _ in key.hasPrefix(tenantID.lowercasedString + ":") }
    }

    /// Counts (and, at most once a minute per tenant, logs) a sign-in through a provider that
    /// does not qualify, on an Apple platform where the tenant is in violation of guideline 4.8.
    /// Never refuses it: people are not locked out by an operator's mistake. Sign-ins through
    /// Apple, on other platforms, or without a platform are not looked at.
    package func noteSignIn(tenant: Tenant, provider: ProviderID, platform rawPlatform: String?, logger: Logger?) async {
        guard provider != .apple, let platform = rawPlatform.flatMap(ProviderPlatform.init(rawValue:)),
            LoginPolicy.applePlatforms.contains(platform),
            // A sign-in never fails for this: without the catalog, nothing is counted.
            let catalog = try? await catalog(for: tenant),
            case .violation(let providers) = catalog.policy.compliance(on: platform), providers.contains(provider)
        else { return }
        Counter(
            label: "broker_policy_violation_sign_ins_total",
            dimensions: [("tenant", tenant.slug.rawValue), ("provider", provider.rawValue), ("platform", platform.rawValue)]
        ).increment()
        let now = ContinuousClock.now
        let due = lastLogged.withLock { last in
            guard last[tenant.id].map({ now - $0 >= .seconds(60) }) ?? true else { return false }
            last[tenant.id] = now
            return true
        }
        if due {
            logger?.warning(
                "sign-in through a provider that does not qualify under guideline 4.8 while the tenant offers no equivalent option",
                metadata: [
                    "tenant": "\(tenant.slug.rawValue)", "provider": "\(provider.rawValue)", "platform": "\(platform.rawValue)",
                    "hint": "broker policy check --tenant \(tenant.slug.rawValue)",
                ])
        }
    }
}

import BrokerCore
import Foundation
import Logging
import PostgresNIO

/// Google and Facebook settings of a tenant: one row per tenant and provider
/// (`provider_configs`). Every change notifies other broker processes and is audited.
public struct ProviderConfigRepository: Sendable {
    let client: PostgresClient
    let logger: Logger

    static let columns =
        "p.tenant_id, p.provider, p.platforms, p.client_ids, p.hosted_domain, p.secret_sealed, p.limited_login, p.created_at, p.updated_at"

    /// Creates the tenant's settings of the provider, or replaces them entirely. `policyGuard`
    /// may refuse the change (guideline 4.8), and nothing is written.
    public func save(_ configuration: ProviderConfiguration, actor: String, guard policyGuard: LoginPolicyGuard? = nil)
        async throws -> ProviderConfiguration
    {
        try await LoginPolicyRepository.transaction(
            client, tenantID: configuration.tenantID, guard: policyGuard, actor: actor, logger: logger
        ) { connection in
            let rows = try await connection.query(
                """
                INSERT INTO provider_configs AS p (tenant_id, provider, platforms, client_ids, hosted_domain, secret_sealed,
                    limited_login)
                VALUES (\(configuration.tenantID), \(configuration.provider.rawValue), \(configuration.platforms.map(\.rawValue)),
                    \(configuration.clientIDs), \(configuration.hostedDomain), \(configuration.sealedSecret),
                    \(configuration.limitedLogin))
                ON CONFLICT (tenant_id, provider) DO UPDATE SET
                    platforms = EXCLUDED.platforms, client_ids = EXCLUDED.client_ids, hosted_domain = EXCLUDED.hosted_domain,
                    secret_sealed = EXCLUDED.secret_sealed, limited_login = EXCLUDED.limited_login, updated_at = now()
                RETURNING \(unescaped: Self.columns)
                """, logger: logger)
            guard let row = try await rows.collect().first else { throw StorageError.configuration("no provider_configs row") }
            let saved = try Self.decode(row)
            try await Database.notify(.providerConfigs, tenantID: configuration.tenantID, on: connection, logger: logger)
            try await AuditLogRepository.append(
                tenantID: configuration.tenantID, actor: actor, action: "provider.enable", target: configuration.provider.rawValue,
                on: connection, logger: logger)
            return saved
        }
    }

    /// Removes the tenant's settings of the provider (its sealed secret with them); false when
    /// there were none. `policyGuard` may refuse it (guideline 4.8), and nothing is written.
    public func delete(tenantID: UUID, provider: ProviderName, actor: String, guard policyGuard: LoginPolicyGuard? = nil)
        async throws -> Bool
    {
        try await LoginPolicyRepository.transaction(client, tenantID: tenantID, guard: policyGuard, actor: actor, logger: logger) {
            connection in
            let rows = try await connection.query(
                "DELETE FROM provider_configs WHERE tenant_id = \(tenantID) AND provider = \(provider.rawValue) RETURNING provider",
                logger: logger)
            guard try await rows.collect().first != nil else { return false }
            try await Database.notify(.providerConfigs, tenantID: tenantID, on: connection, logger: logger)
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: actor, action: "provider.disable", target: provider.rawValue, on: connection,
                logger: logger)
            return true
        }
    }

    /// The statement of `find`, on the sign-in path (its plan is asserted by HotStatementPlanTests).
    static func findQuery(tenantID: UUID, provider: ProviderName) -> PostgresQuery {
        "SELECT \(unescaped: Self.columns) FROM provider_configs p WHERE p.tenant_id = \(tenantID) AND p.provider = \(provider.rawValue)"
    }

    /// The tenant's settings of the provider; nil when it is not enabled.
    public func find(tenantID: UUID, provider: ProviderName) async throws -> ProviderConfiguration? {
        let rows = try await client.query(Self.findQuery(tenantID: tenantID, provider: provider), logger: logger)
        guard let row = try await rows.collect().first else { return nil }
        return try Self.decode(row)
    }

    /// Every configured provider of the tenant, by name.
    public func list(tenantID: UUID) async throws -> [ProviderConfiguration] {
        let rows = try await client.query(
            "SELECT \(unescaped: Self.columns) FROM provider_configs p WHERE p.tenant_id = \(tenantID) ORDER BY p.provider",
            logger: logger)
        return try await rows.collect().map(Self.decode)
    }

    static func decode(_ row: PostgresRow) throws -> ProviderConfiguration {
        var reader = RowReader(row)
        let tenantID: UUID = try reader.next()
        let provider = ProviderName(rawValue: try reader.next(String.self)) ?? .google
        let platforms = try reader.next([String].self).compactMap(ProviderPlatform.init(rawValue:))
        return ProviderConfiguration(
            tenantID: tenantID, provider: provider, platforms: platforms, clientIDs: try reader.next(),
            hostedDomain: try reader.next(), sealedSecret: try reader.next(), limitedLogin: try reader.next(),
            createdAt: try reader.next(), updatedAt: try reader.next())
    }
}

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

    /// Creates the tenant's settings of the provider, or replaces them entirely. A replacement
    /// that changes what an attestation covers (``ProviderConfiguration/attestedSettingsChanged(by:)``)
    /// withdraws the provider's attestation in the same transaction, before `policyGuard` judges
    /// the change (guideline 4.8), which may refuse it: then nothing is written.
    public func save(_ configuration: ProviderConfiguration, actor: String, guard policyGuard: LoginPolicyGuard? = nil)
        async throws -> (configuration: ProviderConfiguration, withdrawn: AttestationWithdrawal?)
    {
        try await LoginPolicyRepository.transaction(
            client, tenantID: configuration.tenantID, guard: policyGuard, actor: actor, logger: logger
        ) { connection in
            let previousRows = try await connection.query(
                """
                SELECT \(unescaped: Self.columns) FROM provider_configs p
                WHERE p.tenant_id = \(configuration.tenantID) AND p.provider = \(configuration.provider.rawValue)
                FOR UPDATE
                """, logger: logger)
            let previous = try await previousRows.collect().first.map(Self.decode)
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
            var withdrawn: AttestationWithdrawal?
            if let changed = previous?.attestedSettingsChanged(by: configuration), !changed.isEmpty {
                withdrawn = try await Self.withdrawAttestation(
                    tenantID: configuration.tenantID, provider: configuration.provider, reason: .configurationChanged,
                    changed: changed, actor: actor, on: connection, logger: logger)
            }
            return (saved, withdrawn)
        }
    }

    /// Removes the tenant's settings of the provider (its sealed secret with them) and withdraws
    /// its attestation; `deleted` false when there were none (nothing written). `policyGuard`
    /// may refuse it (guideline 4.8), and nothing is written.
    public func delete(tenantID: UUID, provider: ProviderName, actor: String, guard policyGuard: LoginPolicyGuard? = nil)
        async throws -> (deleted: Bool, withdrawn: AttestationWithdrawal?)
    {
        try await LoginPolicyRepository.transaction(client, tenantID: tenantID, guard: policyGuard, actor: actor, logger: logger) {
            connection in
            let rows = try await connection.query(
                "DELETE FROM provider_configs WHERE tenant_id = \(tenantID) AND provider = \(provider.rawValue) RETURNING provider",
                logger: logger)
            guard try await rows.collect().first != nil else { return (false, nil) }
            try await Database.notify(.providerConfigs, tenantID: tenantID, on: connection, logger: logger)
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: actor, action: "provider.disable", target: provider.rawValue, on: connection,
                logger: logger)
            let withdrawn = try await Self.withdrawAttestation(
                tenantID: tenantID, provider: provider, reason: .providerDisabled, changed: [], actor: actor, on: connection,
                logger: logger)
            return (true, withdrawn)
        }
    }

    /// Deletes the provider's attestation, if any, and records `provider.attestation_withdrawn`
    /// with the reason, what changed and the attestation it ends; nil when there was none.
    static func withdrawAttestation(
        tenantID: UUID, provider: ProviderName, reason: AttestationWithdrawal.Reason, changed: [String], actor: String,
        on connection: PostgresConnection, logger: Logger
    ) async throws -> AttestationWithdrawal? {
        let rows = try await connection.query(
            """
            DELETE FROM provider_attestations WHERE tenant_id = \(tenantID) AND provider = \(provider.rawValue)
            RETURNING attested_at, attested_by
            """, logger: logger)
        var attestation: ProviderAttestation?
        for try await (at, by) in rows.decode((Date, String).self) {
            attestation = ProviderAttestation(provider: provider, attestedAt: at, attestedBy: by)
        }
        guard let attestation else { return nil }
        var details: [String: AuditDetail] = [
            "reason": .string(reason.rawValue), "attested_at": .string(attestation.attestedAt.iso8601String),
            "attested_by": .string(attestation.attestedBy), "guideline": .string("4.8"),
        ]
        if !changed.isEmpty { details["changed"] = .strings(changed) }
        try await AuditLogRepository.append(
            tenantID: tenantID, actor: actor, action: "provider.attestation_withdrawn", target: provider.rawValue,
            details: details, on: connection, logger: logger)
        return AttestationWithdrawal(provider: provider, reason: reason, changed: changed, attestation: attestation)
    }

    /// The statement of `find`, on the sign-in path (its plan is asserted by HotStatementPlanTests).
    static func findQuery(tenantID: UUID, provider: ProviderName) -> PostgresQuery {
        "SELECT \(unescaped: Self.columns) FROM provider_configs p WHERE p.tenant_id = \(tenantID) AND p.provider = \(provider.rawValue)"
    }

    /// The tenant's settings of the provider; nil when it is not enabled.
    public func find(tenantID: UUID, provider: ProviderName) async throws -> ProviderConfiguration? {
        let rows = try await client.rows(Self.findQuery(tenantID: tenantID, provider: provider), logger: logger)
        guard let row = rows.first else { return nil }
        return try Self.decode(row)
    }

    /// Every configured provider of the tenant, by name.
    public func list(tenantID: UUID) async throws -> [ProviderConfiguration] {
        let rows = try await client.rows(
            "SELECT \(unescaped: Self.columns) FROM provider_configs p WHERE p.tenant_id = \(tenantID) ORDER BY p.provider",
            logger: logger)
        return try rows.map(Self.decode)
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

import BrokerCore
import Foundation
import Logging
import PostgresNIO

/// A tenant's providers: one row per tenant and provider id (`provider_configs`; decision 0034).
/// Every change notifies other broker processes and is audited.
public struct ProviderConfigRepository: Sendable {
    let client: PostgresClient
    let logger: Logger

    static let columns =
        "p.tenant_id, p.provider, p.type, p.enabled, p.platforms, p.client_ids, p.settings::text, p.secret_sealed, p.created_at, p.updated_at"

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
            if let issuer = configuration.string("issuer") {
                let sharing = try await connection.query(
                    """
                    SELECT provider FROM provider_configs
                    WHERE tenant_id = \(configuration.tenantID) AND settings ->> 'issuer' = \(issuer)
                        AND provider <> \(configuration.provider.rawValue)
                    """, logger: logger)
                if let other = try await sharing.collect().first.map({ try $0.decode(String.self) }) {
                    throw ProviderConfigConflict.issuerInUse(issuer: issuer, by: other)
                }
            }
            if let previous, previous.type != configuration.type {
                throw ProviderConfigConflict.typeChanged(provider: configuration.provider, from: previous.type)
            }
            let rows = try await connection.query(
                """
                INSERT INTO provider_configs AS p (tenant_id, provider, type, enabled, platforms, client_ids, settings, secret_sealed)
                VALUES (\(configuration.tenantID), \(configuration.provider.rawValue), \(configuration.type.rawValue),
                    \(configuration.enabled), \(configuration.platforms.map(\.rawValue)), \(configuration.clientIDs),
                    \(Self.settingsText(configuration.settings))::jsonb, \(configuration.sealedSecret))
                ON CONFLICT (tenant_id, provider) DO UPDATE SET
                    enabled = EXCLUDED.enabled, platforms = EXCLUDED.platforms, client_ids = EXCLUDED.client_ids,
                    settings = EXCLUDED.settings, secret_sealed = EXCLUDED.secret_sealed, updated_at = now()
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

    /// Turns the tenant's provider off (`enabled` false) or back on, keeping its settings and
    /// identities; `changed` false when it already was (nothing written). Turning a provider off
    /// withdraws its attestation. Apple has a row only once it was turned off (its settings live
    /// in its own tables): turning it off creates one. `policyGuard` may refuse it (guideline
    /// 4.8), and nothing is written.
    public func setEnabled(
        _ enabled: Bool, tenantID: UUID, provider: ProviderID, actor: String, guard policyGuard: LoginPolicyGuard? = nil
    ) async throws -> (changed: Bool, withdrawn: AttestationWithdrawal?) {
        try await LoginPolicyRepository.transaction(client, tenantID: tenantID, guard: policyGuard, actor: actor, logger: logger) {
            connection in
            let rows: PostgresRowSequence
            if provider == .apple, !enabled {
                rows = try await connection.query(
                    """
                    INSERT INTO provider_configs AS p (tenant_id, provider, type, enabled, client_ids)
                    VALUES (\(tenantID), 'apple', 'apple', false, '{}')
                    ON CONFLICT (tenant_id, provider) DO UPDATE SET enabled = false, updated_at = now() WHERE p.enabled
                    RETURNING true
                    """, logger: logger)
            } else {
                rows = try await connection.query(
                    """
                    UPDATE provider_configs SET enabled = \(enabled), updated_at = now()
                    WHERE tenant_id = \(tenantID) AND provider = \(provider.rawValue) AND enabled <> \(enabled)
                    RETURNING true
                    """, logger: logger)
            }
            guard try await rows.collect().first != nil else { return (false, nil) }
            try await Database.notify(.providerConfigs, tenantID: tenantID, on: connection, logger: logger)
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: actor, action: enabled ? "provider.enable" : "provider.disable",
                target: provider.rawValue, on: connection, logger: logger)
            guard !enabled else { return (true, nil) }
            let withdrawn = try await Self.withdrawAttestation(
                tenantID: tenantID, provider: provider, reason: .providerDisabled, changed: [], actor: actor, on: connection,
                logger: logger)
            return (true, withdrawn)
        }
    }

    /// Deletes the provider's attestation, if any, and records `provider.attestation_withdrawn`
    /// with the reason, what changed and the attestation it ends; nil when there was none.
    static func withdrawAttestation(
        tenantID: UUID, provider: ProviderID, reason: AttestationWithdrawal.Reason, changed: [String], actor: String,
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
    static func findQuery(tenantID: UUID, provider: ProviderID) -> PostgresQuery {
        "SELECT \(unescaped: Self.columns) FROM provider_configs p WHERE p.tenant_id = \(tenantID) AND p.provider = \(provider.rawValue)"
    }

    /// The tenant's settings of the provider, enabled or not; nil when it never configured it.
    public func find(tenantID: UUID, provider: ProviderID) async throws -> ProviderConfiguration? {
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
        let id: String = try reader.next()
        // The table allows only slugs: a row that is not one is corrupt, never another provider.
        guard let provider = ProviderID(rawValue: id) else {
            throw StorageError.configuration("provider id '\(id.prefix(40))' is not a slug")
        }
        let type = ProviderType(rawValue: try reader.next())
        let enabled: Bool = try reader.next()
        let platforms = try reader.next([String].self).compactMap(ProviderPlatform.init(rawValue:))
        let clientIDs: [String] = try reader.next()
        let settingsText: String = try reader.next()
        guard let settings = (try? JSONValue.parse(settingsText.utf8))?.object else {
            throw StorageError.configuration("the settings of provider '\(id)' are not a JSON object")
        }
        return ProviderConfiguration(
            tenantID: tenantID, provider: provider, type: type, enabled: enabled, platforms: platforms, clientIDs: clientIDs,
            settings: settings, sealedSecret: try reader.next(), createdAt: try reader.next(), updatedAt: try reader.next())
    }

    /// The settings as the JSON text bound to the `jsonb` column.
    static func settingsText(_ settings: [String: JSONValue]) -> String {
        var writer = JSONWriter()
        writer.value(.object(settings))
        return String(decoding: writer.bytes, as: UTF8.self)
    }
}

/// Why a provider configuration cannot be saved as given.
public enum ProviderConfigConflict: Error, Sendable, Equatable {
    /// Another provider of the tenant has this issuer.
    case issuerInUse(issuer: String, by: String)
    /// The id is configured with another type (an id keeps its type; disable it and pick a new id).
    case typeChanged(provider: ProviderID, from: ProviderType)
}

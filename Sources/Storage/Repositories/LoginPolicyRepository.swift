import BrokerCore
import Foundation
import Logging
import PostgresNIO

/// The guideline 4.8 policy of a tenant (decision 0026): its mode and exemption (columns of
/// `tenants`), the providers' attestations, and the snapshot ``LoginPolicy`` evaluates, built from
/// those, the Apple clients' platforms and the Google and Facebook settings.
public struct LoginPolicyRepository: Sendable {
    let client: PostgresClient
    let logger: Logger

    /// The tenant's policy as it stands: Apple offered on the union of its clients' platforms,
    /// Google and Facebook on their `platforms` (an empty list: every platform), each attested
    /// or not. Providers in ``ProviderID`` order (Apple first).
    public func loginPolicy(for tenant: Tenant) async throws -> LoginPolicy {
        let rows = try await client.rows(Self.offeredQuery(tenantID: tenant.id), logger: logger)
        return LoginPolicy(settings: tenant.policy, offered: try Self.decodeOffered(rows))
    }

    /// Sets the tenant's mode; refused by `policyGuard` (nothing written) when it breaks the rule.
    public func setMode(tenantID: UUID, _ mode: LoginPolicyMode, actor: String, guard policyGuard: LoginPolicyGuard?) async throws
        -> Tenant
    {
        try await Self.transaction(client, tenantID: tenantID, guard: policyGuard, actor: actor, logger: logger) { connection in
            let tenant = try await Self.updateTenant(
                "UPDATE tenants SET policy_mode = \(mode.rawValue), updated_at = now() WHERE id = \(tenantID)",
                on: connection, logger: logger)
            try await Database.notify(.tenants, tenantID: tenantID, on: connection, logger: logger)
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: actor, action: "policy.mode.set", target: tenant.slug.rawValue,
                details: ["mode": .string(mode.rawValue)], on: connection, logger: logger)
            return tenant
        }
    }

    /// Records an exemption (replacing one recorded before); `since` is the database's now.
    public func setExemption(tenantID: UUID, reason: LoginPolicyExemptionReason, note: String, actor: String) async throws -> Tenant {
        try await client.transaction(logger: logger) { connection in
            let tenant = try await Self.updateTenant(
                """
                UPDATE tenants SET policy_exemption_reason = \(reason.rawValue), policy_exemption_note = \(note),
                    policy_exempted_at = now(), updated_at = now()
                WHERE id = \(tenantID)
                """, on: connection, logger: logger)
            try await Database.notify(.tenants, tenantID: tenantID, on: connection, logger: logger)
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: actor, action: "policy.exempt", target: tenant.slug.rawValue,
                details: ["reason": .string(reason.rawValue), "note": .string(note)], on: connection, logger: logger)
            return tenant
        }
    }

    /// Clears the tenant's exemption; nil when it had none (nothing written). Refused by
    /// `policyGuard` when something depends on it.
    public func clearExemption(tenantID: UUID, actor: String, guard policyGuard: LoginPolicyGuard?) async throws -> Tenant? {
        try await Self.transaction(client, tenantID: tenantID, guard: policyGuard, actor: actor, logger: logger) { connection in
            let rows = try await connection.query(
                """
                UPDATE tenants SET policy_exemption_reason = NULL, policy_exemption_note = NULL,
                    policy_exempted_at = NULL, updated_at = now()
                WHERE id = \(tenantID) AND policy_exemption_reason IS NOT NULL
                RETURNING \(unescaped: TenantRepository.columns)
                """, logger: logger)
            guard let tenant = try await rows.collect().first.map(TenantRepository.decode) else { return nil }
            try await Database.notify(.tenants, tenantID: tenantID, on: connection, logger: logger)
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: actor, action: "policy.exemption.clear", target: tenant.slug.rawValue,
                on: connection, logger: logger)
            return tenant
        }
    }

    /// The tenant's attestations, by provider.
    public func attestations(tenantID: UUID) async throws -> [ProviderAttestation] {
        let rows = try await client.rows(
            """
            SELECT provider, attested_at, attested_by FROM provider_attestations
            WHERE tenant_id = \(tenantID) ORDER BY provider
            """, logger: logger)
        var found: [ProviderAttestation] = []
        for row in rows {
            let (provider, at, by) = try row.decode((String, Date, String).self)
            guard let name = ProviderID(rawValue: provider) else { continue }
            found.append(ProviderAttestation(provider: name, attestedAt: at, attestedBy: by))
        }
        return found
    }

    /// Records (or renews) the operator's attestation that the provider meets the three
    /// criteria. Any provider but Apple (Apple qualifies built in; the admin refuses it).
    public func attest(tenantID: UUID, provider: ProviderID, actor: String) async throws -> ProviderAttestation {
        try await client.transaction(logger: logger) { connection in
            let rows = try await connection.query(
                """
                INSERT INTO provider_attestations (tenant_id, provider, attested_by)
                VALUES (\(tenantID), \(provider.rawValue), \(actor))
                ON CONFLICT (tenant_id, provider) DO UPDATE SET attested_at = now(), attested_by = EXCLUDED.attested_by
                RETURNING attested_at, attested_by
                """, logger: logger)
            var attestation: ProviderAttestation?
            for try await (at, by) in rows.decode((Date, String).self) {
                attestation = ProviderAttestation(provider: provider, attestedAt: at, attestedBy: by)
            }
            guard let attestation else { throw StorageError.configuration("no provider_attestations row") }
            try await Database.notify(.providerConfigs, tenantID: tenantID, on: connection, logger: logger)
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: actor, action: "provider.attest", target: provider.rawValue,
                details: [
                    "limits_data_to_name_email": .bool(true), "private_email": .bool(true), "no_ad_tracking": .bool(true),
                ], on: connection, logger: logger)
            return attestation
        }
    }

    /// Withdraws the provider's attestation; false when there was none. Refused by
    /// `policyGuard` when something depends on it.
    public func revoke(tenantID: UUID, provider: ProviderID, actor: String, guard policyGuard: LoginPolicyGuard?) async throws
        -> Bool
    {
        try await Self.transaction(client, tenantID: tenantID, guard: policyGuard, actor: actor, logger: logger) { connection in
            let rows = try await connection.query(
                """
                DELETE FROM provider_attestations WHERE tenant_id = \(tenantID) AND provider = \(provider.rawValue)
                RETURNING provider
                """, logger: logger)
            guard try await rows.collect().first != nil else { return false }
            try await Database.notify(.providerConfigs, tenantID: tenantID, on: connection, logger: logger)
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: actor, action: "provider.attestation.revoke", target: provider.rawValue,
                on: connection, logger: logger)
            return true
        }
    }
}

/// A change's check against guideline 4.8, run inside the change's transaction (decision 0026).
/// The admin layer words refusals; the repository locks, snapshots and records.
public struct LoginPolicyGuard: Sendable {
    /// The change, as its audit action names it (`provider.enable`, `apple.client.remove`, ...).
    public var action: String
    /// The command an operator ran, for the audit row of a forced violation.
    public var command: String
    /// Given the tenant's policy before and after the change (both read in its transaction),
    /// throws to refuse it (everything rolls back) or returns the violations it lets through,
    /// recorded as `policy.violation_forced` in the same transaction.
    public var evaluate: @Sendable (_ before: LoginPolicy, _ after: LoginPolicy) throws -> Set<LoginPolicy.Violation>

    public init(
        action: String, command: String,
        evaluate: @escaping @Sendable (_ before: LoginPolicy, _ after: LoginPolicy) throws -> Set<LoginPolicy.Violation>
    ) {
        self.action = action
        self.command = command
        self.evaluate = evaluate
    }
}

extension LoginPolicyRepository {
    /// A transaction whose `write` runs under the tenant's policy (``guarded``); a refusal comes
    /// out as the ``BrokerError`` the guard threw.
    static func transaction<T: Sendable>(
        _ client: PostgresClient, tenantID: UUID, guard policyGuard: LoginPolicyGuard?, actor: String, logger: Logger,
        _ write: @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await refusalsUnwrapped {
            try await client.transaction(logger: logger) { connection in
                try await guarded(tenantID: tenantID, policyGuard, actor: actor, on: connection, logger: logger) {
                    try await write(connection)
                }
            }
        }
    }

    /// Runs `write` under the tenant's policy: locks the tenant row (`FOR NO KEY UPDATE`: policy
    /// changes of one tenant queue behind each other, sign-ins' key-share locks do not), reads
    /// the policy, writes, reads it again and lets `policyGuard` judge. Without a guard, only
    /// `write` runs.
    static func guarded<T>(
        tenantID: UUID, _ policyGuard: LoginPolicyGuard?, actor: String, on connection: PostgresConnection, logger: Logger,
        _ write: @Sendable () async throws -> T
    ) async throws -> T {
        guard let policyGuard else { return try await write() }
        let lock = try await connection.query(
            "SELECT \(unescaped: TenantRepository.columns) FROM tenants WHERE id = \(tenantID) FOR NO KEY UPDATE", logger: logger)
        guard let locked = try await lock.collect().first.map(TenantRepository.decode) else {
            throw BrokerError.tenantNotFound(tenantID.lowercasedString)
        }
        let before = try await snapshot(of: locked, on: connection, logger: logger)
        let result = try await write()
        let reread = try await connection.query(
            "SELECT \(unescaped: TenantRepository.columns) FROM tenants WHERE id = \(tenantID)", logger: logger)
        let changed = try await reread.collect().first.map(TenantRepository.decode) ?? locked
        let after = try await snapshot(of: changed, on: connection, logger: logger)
        let forced = try policyGuard.evaluate(before, after)
        if !forced.isEmpty {
            let sorted = forced.sorted()
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: actor, action: "policy.violation_forced", target: policyGuard.action,
                details: [
                    "action": .string(policyGuard.action), "command": .string(policyGuard.command),
                    "violations": .strings(sorted.map { "\($0.platform.rawValue):\($0.provider.rawValue)" }),
                    "guideline": .string("4.8"),
                ], on: connection, logger: logger)
        }
        return result
    }

    static func snapshot(of tenant: Tenant, on connection: PostgresConnection, logger: Logger) async throws -> LoginPolicy {
        let rows = try await connection.query(offeredQuery(tenantID: tenant.id), logger: logger).collect()
        return LoginPolicy(settings: tenant.policy, offered: try decodeOffered(rows))
    }

    /// One row per offered provider: Apple (when it has clients and is not disabled) with the
    /// union of its clients' platforms; every other enabled provider with its platforms; whether
    /// each is attested.
    static func offeredQuery(tenantID: UUID) -> PostgresQuery {
        """
        SELECT 'apple', array_agg(DISTINCT platform ORDER BY platform), false
        FROM apple_clients c CROSS JOIN LATERAL unnest(c.platforms) AS platform
        WHERE c.tenant_id = \(tenantID) AND NOT EXISTS (
            SELECT 1 FROM provider_configs d WHERE d.tenant_id = c.tenant_id AND d.provider = 'apple' AND NOT d.enabled)
        HAVING count(*) > 0
        UNION ALL
        SELECT p.provider, p.platforms, EXISTS (
            SELECT 1 FROM provider_attestations a WHERE a.tenant_id = p.tenant_id AND a.provider = p.provider)
        FROM provider_configs p
        WHERE p.tenant_id = \(tenantID) AND p.enabled AND p.provider <> 'apple'
        """
    }

    static func decodeOffered(_ rows: [PostgresRow]) throws -> [OfferedProvider] {
        var offered: [OfferedProvider] = []
        for row in rows {
            let (name, platformNames, attested) = try row.decode((String, [String], Bool).self)
            guard let provider = ProviderID(rawValue: name) else { continue }
            var platforms = Set(platformNames.compactMap(ProviderPlatform.init(rawValue:)))
            // A provider with no --platforms: offered everywhere, as far as the rule goes.
            if provider != .apple, platforms.isEmpty { platforms = Set(ProviderPlatform.allCases) }
            offered.append(OfferedProvider(provider: provider, platforms: platforms, attested: attested))
        }
        return offered.sorted { $0.provider < $1.provider }
    }

    static func updateTenant(_ query: PostgresQuery, on connection: PostgresConnection, logger: Logger) async throws -> Tenant {
        var returning = query
        returning.sql += " RETURNING \(TenantRepository.columns)"
        let rows = try await connection.query(returning, logger: logger)
        guard let tenant = try await rows.collect().first.map(TenantRepository.decode) else {
            throw StorageError.configuration("UPDATE tenants found no tenant")
        }
        return tenant
    }

    /// Runs a transaction and rethrows a refusal (a ``BrokerError`` its body threw, e.g. by the
    /// policy guard) as itself rather than wrapped in `PostgresTransactionError`.
    static func refusalsUnwrapped<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as PostgresTransactionError {
            if let refusal = error.closureError as? BrokerError { throw refusal }
            // A provider change its repository refused (an issuer already in use, a type change).
            if let conflict = error.closureError as? ProviderConfigConflict { throw conflict }
            throw error
        }
    }
}

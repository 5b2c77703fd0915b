import BrokerCore
import Foundation
import Logging
import PostgresNIO

public struct TenantRepository: Sendable {
    let client: PostgresClient
    let logger: Logger

    static let columns = """
        id, slug, display_name, status, access_token_ttl, refresh_token_absolute_ttl, refresh_token_idle_ttl,
        audiences, auto_link_verified_email, key_activation_delay, created_at, updated_at,
        policy_mode, policy_exemption_reason, policy_exemption_note, policy_exempted_at, rate_limit, rate_burst,
        max_sessions_per_account
        """

    /// Creates the tenant and its first signing key in one transaction.
    public func create(_ tenant: Tenant, firstKey: SigningKeyRecord, actor: String) async throws -> Tenant {
        do {
            return try await client.transaction(logger: logger) { connection in
                let rows = try await connection.query(
                    """
                    INSERT INTO tenants (id, slug, display_name, status, access_token_ttl, refresh_token_absolute_ttl,
                        refresh_token_idle_ttl, audiences, auto_link_verified_email, key_activation_delay)
                    VALUES (\(tenant.id), \(tenant.slug.rawValue), \(tenant.displayName), \(tenant.status.rawValue),
                        \(tenant.session.accessTokenTTL), \(tenant.session.refreshTokenAbsoluteTTL),
                        \(tenant.session.refreshTokenIdleTTL), \(tenant.session.audiences),
                        \(tenant.linking.autoLinkVerifiedEmail), \(tenant.keyActivationDelay))
                    RETURNING \(unescaped: Self.columns)
                    """, logger: logger)
                guard let created = try await rows.collect().first.map(Self.decode) else {
                    throw StorageError.configuration("INSERT INTO tenants returned no row")
                }
                try await SigningKeyRepository.insert(firstKey, on: connection, logger: logger)
                try await AuditLogRepository.append(
                    tenantID: created.id, actor: actor, action: "tenant.create", target: created.slug.rawValue,
                    on: connection, logger: logger)
                return created
            }
        } catch let error where error.postgresError?.isUniqueViolation == true {
            throw StorageConflict.tenantExists(tenant.slug)
        }
    }

    public func list() async throws -> [Tenant] {
        try await TenantScope.acrossTenants(because: "the list of every tenant") {
            let rows = try await client.rows("SELECT \(unescaped: Self.columns) FROM tenants ORDER BY slug", logger: logger)
            return try rows.map(Self.decode)
        }
    }

    public func find(slug: String) async throws -> Tenant? {
        try await TenantScope.acrossTenants(because: "a slug names its tenant before the tenant's id is known") {
            let rows = try await client.rows(
                "SELECT \(unescaped: Self.columns) FROM tenants WHERE slug = \(slug)", logger: logger)
            return try rows.first.map(Self.decode)
        }
    }

    /// The tenant as it stands (in the task's tenant scope): callers cache tenants, and what is
    /// derived from a tenant's settings and cached itself reads them here, not from a copy.
    public func find(id: UUID) async throws -> Tenant? {
        let rows = try await client.rows("SELECT \(unescaped: Self.columns) FROM tenants WHERE id = \(id)", logger: logger)
        return try rows.first.map(Self.decode)
    }

    public func setStatus(slug: String, _ status: TenantStatus, actor: String) async throws -> Tenant? {
        try await client.transaction(logger: logger) { connection in
            let rows = try await connection.query(
                """
                UPDATE tenants SET status = \(status.rawValue), updated_at = now() WHERE slug = \(slug)
                RETURNING \(unescaped: Self.columns)
                """, logger: logger)
            guard let tenant = try await rows.collect().first.map(Self.decode) else { return nil }
            try await Database.notify(.tenants, tenantID: tenant.id, on: connection, logger: logger)
            try await AuditLogRepository.append(
                tenantID: tenant.id, actor: actor, action: "tenant.\(status == .active ? "enable" : "disable")",
                target: slug, on: connection, logger: logger)
            return tenant
        }
    }

    static func decode(_ row: PostgresRow) throws -> Tenant {
        var reader = RowReader(row)
        return try decode(&reader)
    }

    static func decode(_ reader: inout RowReader) throws -> Tenant {
        var tenant = Tenant(
            id: try reader.next(), slug: try TenantSlug(try reader.next(String.self)), displayName: try reader.next(),
            status: TenantStatus(rawValue: try reader.next(String.self)) ?? .disabled,
            session: SessionSettings(
                accessTokenTTL: try reader.next(), refreshTokenAbsoluteTTL: try reader.next(),
                refreshTokenIdleTTL: try reader.next(), audiences: try reader.next()),
            linking: LinkingSettings(autoLinkVerifiedEmail: try reader.next()), keyActivationDelay: try reader.next(),
            createdAt: try reader.next(), updatedAt: try reader.next())
        let mode = LoginPolicyMode(rawValue: try reader.next(String.self)) ?? .privacyEquivalent
        let (reason, note, since): (String?, String?, Date?) = (try reader.next(), try reader.next(), try reader.next())
        var exemption: LoginPolicyExemption?
        if let reason = reason.flatMap(LoginPolicyExemptionReason.init(rawValue:)), let since {
            exemption = LoginPolicyExemption(reason: reason, note: note ?? "", since: since)
        }
        tenant.policy = LoginPolicySettings(mode: mode, exemption: exemption)
        let (rate, burst): (Int?, Int?) = (try reader.next(), try reader.next())
        if let rate, let burst { tenant.rateLimit = RateLimit(perSecond: rate, burst: burst) }
        tenant.session.maxSessionsPerAccount = try reader.next()
        return tenant
    }

    /// Turns auto-linking by verified email on or off (`broker tenant set`).
    public func setAutoLinkVerifiedEmail(slug: String, _ on: Bool, actor: String) async throws -> Tenant? {
        try await client.transaction(logger: logger) { connection in
            let rows = try await connection.query(
                """
                UPDATE tenants SET auto_link_verified_email = \(on), updated_at = now() WHERE slug = \(slug)
                RETURNING \(unescaped: Self.columns)
                """, logger: logger)
            guard let tenant = try await rows.collect().first.map(Self.decode) else { return nil }
            try await Database.notify(.tenants, tenantID: tenant.id, on: connection, logger: logger)
            try await AuditLogRepository.append(
                tenantID: tenant.id, actor: actor, action: "tenant.set", target: slug,
                details: ["auto_link_verified_email": .bool(on)], on: connection, logger: logger)
            return tenant
        }
    }

    /// Sets how many open sessions each of the tenant's accounts may have.
    public func setMaxSessionsPerAccount(slug: String, _ cap: Int, actor: String) async throws -> Tenant? {
        try await client.transaction(logger: logger) { connection in
            let rows = try await connection.query(
                """
                UPDATE tenants SET max_sessions_per_account = \(cap), updated_at = now() WHERE slug = \(slug)
                RETURNING \(unescaped: Self.columns)
                """, logger: logger)
            guard let tenant = try await rows.collect().first.map(Self.decode) else { return nil }
            try await Database.notify(.tenants, tenantID: tenant.id, on: connection, logger: logger)
            try await AuditLogRepository.append(
                tenantID: tenant.id, actor: actor, action: "tenant.set", target: slug,
                details: ["max_sessions_per_account": .int(cap)], on: connection, logger: logger)
            return tenant
        }
    }

    /// Sets the rate of the tenant's API keys; nil returns them to the instance's default.
    public func setRateLimit(slug: String, _ limit: RateLimit?, actor: String) async throws -> Tenant? {
        try await client.transaction(logger: logger) { connection in
            let rows = try await connection.query(
                """
                UPDATE tenants SET rate_limit = \(limit?.perSecond), rate_burst = \(limit?.burst), updated_at = now()
                WHERE slug = \(slug)
                RETURNING \(unescaped: Self.columns)
                """, logger: logger)
            guard let tenant = try await rows.collect().first.map(Self.decode) else { return nil }
            try await Database.notify(.tenants, tenantID: tenant.id, on: connection, logger: logger)
            let details: [String: AuditDetail] =
                if let limit { ["rate_limit": .int(limit.perSecond), "rate_burst": .int(limit.burst)] } else {
                    ["rate_limit": .string("default")]
                }
            try await AuditLogRepository.append(
                tenantID: tenant.id, actor: actor, action: "tenant.set", target: slug, details: details, on: connection, logger: logger)
            return tenant
        }
    }

    /// The columns above qualified with a table alias, for joins.
    static func columns(alias: String) -> String { qualified(columns, alias: alias) }
}

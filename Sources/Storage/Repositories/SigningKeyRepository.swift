import BrokerCore
import Foundation
import Logging
import PostgresNIO

public struct SigningKeyRepository: Sendable {
    let client: PostgresClient
    let logger: Logger

    static let columns =
        "id, tenant_id, kid, algorithm, public_key, private_key_sealed, created_at, activates_at, retired_at, revoked_at"

    public func insert(_ key: SigningKeyRecord, actor: String) async throws {
        try await client.transaction(logger: logger) { connection in
            try await Self.insert(key, on: connection, logger: logger)
            try await Database.notify(.signingKeys, tenantID: key.tenantID, on: connection, logger: logger)
            try await AuditLogRepository.append(
                tenantID: key.tenantID, actor: actor, action: "signing_key.create", target: key.kid,
                on: connection, logger: logger)
        }
    }

    static func insert(_ key: SigningKeyRecord, on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query(
            """
            INSERT INTO signing_keys (id, tenant_id, kid, algorithm, public_key, private_key_sealed, created_at, activates_at)
            VALUES (\(key.id), \(key.tenantID), \(key.kid), \(key.algorithm), \(key.publicKey), \(key.sealedPrivateKey),
                \(key.createdAt), \(key.activatesAt))
            """, logger: logger)
    }

    public func list(tenantID: UUID) async throws -> [SigningKeyRecord] {
        let rows = try await client.rows(
            "SELECT \(unescaped: Self.columns) FROM signing_keys WHERE tenant_id = \(tenantID) ORDER BY activates_at, created_at",
            logger: logger)
        return try rows.map(Self.decode)
    }

    /// Keys of a tenant looked up by slug, in one round trip (JWKS and metadata paths).
    public func list(tenantSlug: String) async throws -> (tenant: Tenant, keys: [SigningKeyRecord])? {
        try await TenantScope.acrossTenants(because: "a slug names its tenant before the tenant's id is known") {
            let rows = try await client.rows(
                """
                SELECT \(unescaped: TenantRepository.columns(alias: "t")), \(unescaped: Self.columns(alias: "k"))
                FROM tenants t LEFT JOIN signing_keys k ON k.tenant_id = t.id
                WHERE t.slug = \(tenantSlug)
                ORDER BY k.activates_at, k.created_at
                """, logger: logger)
            var tenant: Tenant?
            var keys: [SigningKeyRecord] = []
            for row in rows {
                var reader = RowReader(row)
                if tenant == nil { tenant = try TenantRepository.decode(&reader) } else { _ = try TenantRepository.decode(&reader) }
                var probe = reader
                if try probe.next(UUID?.self) != nil { keys.append(try Self.decode(&reader)) }
            }
            return tenant.map { ($0, keys) }
        }
    }

    /// Sets when keys activate and retire, in one transaction.
    public func update(
        tenantID: UUID, retire: (id: UUID, at: Date)?, activate: (id: UUID, at: Date)?, actor: String, target: String
    ) async throws {
        try await client.transaction(logger: logger) { connection in
            if let activate {
                try await connection.query(
                    "UPDATE signing_keys SET activates_at = \(activate.at) WHERE tenant_id = \(tenantID) AND id = \(activate.id)",
                    logger: logger)
            }
            if let retire {
                try await connection.query(
                    """
                    UPDATE signing_keys SET retired_at = coalesce(retired_at, \(retire.at))
                    WHERE tenant_id = \(tenantID) AND id = \(retire.id)
                    """, logger: logger)
            }
            try await Database.notify(.signingKeys, tenantID: tenantID, on: connection, logger: logger)
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: actor, action: "signing_key.retire", target: target, on: connection, logger: logger)
        }
    }

    /// Revokes a key, in one transaction with what keeps the tenant signing: the promotion of a
    /// `next` key or a new key (`successor`), the notification every instance drops its keys on,
    /// and the audit row. Revoking a revoked key changes nothing (its first revocation time stays).
    public func revoke(
        tenantID: UUID, id: UUID, at now: Date, activate: (id: UUID, at: Date)?, insert successor: SigningKeyRecord?,
        actor: String, target: String
    ) async throws {
        try await client.transaction(logger: logger) { connection in
            if let successor { try await Self.insert(successor, on: connection, logger: logger) }
            if let activate {
                try await connection.query(
                    "UPDATE signing_keys SET activates_at = \(activate.at) WHERE tenant_id = \(tenantID) AND id = \(activate.id)",
                    logger: logger)
            }
            try await connection.query(
                """
                UPDATE signing_keys SET revoked_at = coalesce(revoked_at, \(now)), retired_at = coalesce(retired_at, \(now))
                WHERE tenant_id = \(tenantID) AND id = \(id)
                """, logger: logger)
            try await Database.notify(.signingKeys, tenantID: tenantID, on: connection, logger: logger)
            var details: [String: AuditDetail] = [:]
            if let successor { details["successor"] = .string(successor.kid) }
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: actor, action: "signing_key.revoke", target: target, details: details,
                on: connection, logger: logger)
        }
    }

    static func columns(alias: String) -> String { qualified(columns, alias: alias) }

    static func decode(_ row: PostgresRow) throws -> SigningKeyRecord {
        var reader = RowReader(row)
        return try decode(&reader)
    }

    static func decode(_ reader: inout RowReader) throws -> SigningKeyRecord {
        SigningKeyRecord(
            id: try reader.next(), tenantID: try reader.next(), kid: try reader.next(), algorithm: try reader.next(),
            publicKey: try reader.next(), sealedPrivateKey: try reader.next(), createdAt: try reader.next(),
            activatesAt: try reader.next(), retiredAt: try reader.next(), revokedAt: try reader.next())
    }
}

import BrokerCore
import Foundation
import Logging
import PostgresNIO

public struct APIKeyRepository: Sendable {
    let client: PostgresClient
    let logger: Logger

    static let columns = "k.id, k.tenant_id, k.name, k.prefix, k.scopes, k.created_at, k.last_used_at, k.revoked_at"

    public func insert(_ record: APIKeyRecord, hash: Data, actor: String) async throws {
        try await client.transaction(logger: logger) { connection in
            try await connection.query(
                """
                INSERT INTO api_keys (id, tenant_id, name, prefix, key_hash, scopes, created_at)
                VALUES (\(record.id), \(record.tenantID), \(record.name), \(record.prefix), \(hash),
                    \(record.scopes.map(\.rawValue)), \(record.createdAt))
                """, logger: logger)
            try await AuditLogRepository.append(
                tenantID: record.tenantID, actor: actor, action: "api_key.create", target: record.id.lowercasedString,
                on: connection, logger: logger)
        }
    }

    /// Stamps the key's `last_used_at` unless it was stamped within the last minute (each
    /// instance asks at most once a minute per key; decision 0048).
    public func touch(id: UUID, tenantID: UUID) async throws {
        _ = try await client.rows(
            """
            UPDATE api_keys SET last_used_at = now()
            WHERE tenant_id = \(tenantID) AND id = \(id) AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
            """, logger: logger)
    }

    public func list(tenantID: UUID) async throws -> [APIKeyRecord] {
        let rows = try await client.rows(
            "SELECT \(unescaped: Self.columns) FROM api_keys k WHERE k.tenant_id = \(tenantID) ORDER BY k.created_at, k.id",
            logger: logger)
        return try rows.map(Self.decode)
    }

    /// Revokes the key; returns it, or nil when the tenant has no such key. Idempotent.
    public func revoke(tenantID: UUID, id: UUID, actor: String) async throws -> APIKeyRecord? {
        try await client.transaction(logger: logger) { connection in
            let rows = try await connection.query(
                """
                UPDATE api_keys k SET revoked_at = coalesce(k.revoked_at, now())
                WHERE k.tenant_id = \(tenantID) AND k.id = \(id)
                RETURNING \(unescaped: Self.columns)
                """, logger: logger)
            guard let record = try await rows.collect().first.map(Self.decode) else { return nil }
            try await Database.notify(.apiKeys, tenantID: tenantID, on: connection, logger: logger)
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: actor, action: "api_key.revoke", target: id.lowercasedString,
                on: connection, logger: logger)
            return record
        }
    }

    /// The statement of `lookup` and `authenticate` (its plan is asserted by HotStatementPlanTests,
    /// decision 0014). Revoked keys match too: the caller tells their use from an unknown key's.
    static func authenticateQuery(hash: Data) throws -> PostgresQuery {
        try """
        SELECT \(unescaped: Self.columns), \(unescaped: TenantRepository.columns(alias: "t"))
        FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
        WHERE k.key_hash = \(hash)
        """
    }

    /// The key with this hash, live or revoked (``APIKeyRecord/revokedAt``), and its tenant, in
    /// one round trip; nil when no key has this hash. The use of a revoked key is a security
    /// event of its own (issue 20 §6), so it is told apart from an unknown key.
    public func lookup(hash: Data) async throws -> (APIKeyRecord, Tenant)? {
        try await TenantScope.acrossTenants(because: "a key is found by its hash before its tenant is known") {
            let rows = try await client.rows(try Self.authenticateQuery(hash: hash), logger: logger)
            guard let row = rows.first else { return nil }
            var reader = RowReader(row)
            let key = try Self.decode(&reader)
            let tenant = try TenantRepository.decode(&reader)
            return (key, tenant)
        }
    }

    /// The live key with this hash and its tenant, in one round trip. Revoked keys do not match.
    public func authenticate(hash: Data) async throws -> (APIKeyRecord, Tenant)? {
        try await TenantScope.acrossTenants(because: "a key is found by its hash before its tenant is known") {
            guard let (key, tenant) = try await lookup(hash: hash), key.revokedAt == nil else { return nil }
            return (key, tenant)
        }
    }

    static func decode(_ row: PostgresRow) throws -> APIKeyRecord {
        var reader = RowReader(row)
        return try decode(&reader)
    }

    static func decode(_ reader: inout RowReader) throws -> APIKeyRecord {
        APIKeyRecord(
            id: try reader.next(), tenantID: try reader.next(), name: try reader.next(), prefix: try reader.next(),
            scopes: try reader.next([String].self).compactMap(APIKeyScope.init(rawValue:)),
            createdAt: try reader.next(), lastUsedAt: try reader.next(), revokedAt: try reader.next())
    }
}

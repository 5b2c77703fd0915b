import BrokerCore
import Foundation
import Logging
import PostgresNIO

/// The relying parties of each tenant (`oauth_clients`, migration 0033, decision 0081): created,
/// listed, found, removed and given a new secret; every change audited in its transaction and
/// announced on the `oauth_clients` cache topic (the endpoints' ``ClientDirectory`` drops it).
public struct OAuthClientRepository: Sendable {
    let client: PostgresClient
    let logger: Logger

    static let columns =
        "c.tenant_id, c.client_id, c.name, c.is_public, c.redirect_uris, c.post_logout_redirect_uris, c.allow_loopback, "
        + "c.created_at, c.secret_rotated_at"

    /// Stores a new client (`secretHash` nil: a public one) and audits `client.create`.
    public func insert(_ record: OAuthClient, secretHash: Data?, actor: String) async throws {
        try await client.transaction(logger: logger) { connection in
            try await connection.query(
                """
                INSERT INTO oauth_clients (tenant_id, client_id, name, is_public, secret_hash, redirect_uris,
                    post_logout_redirect_uris, allow_loopback, created_at)
                VALUES (\(record.tenantID), \(record.clientID), \(record.name), \(record.isPublic), \(secretHash),
                    \(record.redirectURIs), \(record.postLogoutRedirectURIs), \(record.allowLoopback), \(record.createdAt))
                """, logger: logger)
            try await AuditLogRepository.append(
                tenantID: record.tenantID, actor: actor, action: "client.create", target: record.clientID, on: connection,
                logger: logger)
            try await Database.notify(.oauthClients, tenantID: record.tenantID, on: connection, logger: logger)
        }
    }

    /// The tenant's clients, oldest first.
    public func list(tenantID: UUID) async throws -> [OAuthClient] {
        let rows = try await client.rows(
            "SELECT \(unescaped: Self.columns) FROM oauth_clients c WHERE c.tenant_id = \(tenantID) ORDER BY c.created_at, c.client_id",
            logger: logger)
        return try rows.map(Self.decode)
    }

    /// The tenant's client `clientID`, or nil.
    public func find(tenantID: UUID, clientID: String) async throws -> OAuthClient? {
        let rows = try await client.rows(
            "SELECT \(unescaped: Self.columns) FROM oauth_clients c WHERE c.tenant_id = \(tenantID) AND c.client_id = \(clientID)",
            logger: logger)
        return try rows.first.map(Self.decode)
    }

    /// The tenant's client `clientID` with its secret's hash (nil for a public client), or nil:
    /// what the token endpoint authenticates a client against (``RegisteredClient``).
    public func registered(tenantID: UUID, clientID: String) async throws -> RegisteredClient? {
        let rows = try await client.rows(
            """
            SELECT \(unescaped: Self.columns), c.secret_hash FROM oauth_clients c
            WHERE c.tenant_id = \(tenantID) AND c.client_id = \(clientID)
            """, logger: logger)
        guard let row = rows.first else { return nil }
        var reader = RowReader(row, startingAt: 9)
        return RegisteredClient(client: try Self.decode(row), secretHash: try reader.next())
    }

    /// Removes the client and audits `client.remove`; returns it, or nil when the tenant has none.
    public func remove(tenantID: UUID, clientID: String, actor: String) async throws -> OAuthClient? {
        try await client.transaction(logger: logger) { connection in
            let rows = try await connection.query(
                """
                DELETE FROM oauth_clients c WHERE c.tenant_id = \(tenantID) AND c.client_id = \(clientID)
                RETURNING \(unescaped: Self.columns)
                """, logger: logger)
            guard let record = try await rows.collect().first.map(Self.decode) else { return nil }
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: actor, action: "client.remove", target: clientID, on: connection, logger: logger)
            try await Database.notify(.oauthClients, tenantID: tenantID, on: connection, logger: logger)
            return record
        }
    }

    /// Replaces a confidential client's secret (the old one stops working at once) and audits
    /// `client.rotate_secret`; nil when the tenant has no such confidential client.
    public func rotateSecret(tenantID: UUID, clientID: String, secretHash: Data, actor: String, now: Date) async throws
        -> OAuthClient?
    {
        try await client.transaction(logger: logger) { connection in
            let rows = try await connection.query(
                """
                UPDATE oauth_clients c SET secret_hash = \(secretHash), secret_rotated_at = \(now)
                WHERE c.tenant_id = \(tenantID) AND c.client_id = \(clientID) AND NOT c.is_public
                RETURNING \(unescaped: Self.columns)
                """, logger: logger)
            guard let record = try await rows.collect().first.map(Self.decode) else { return nil }
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: actor, action: "client.rotate_secret", target: clientID, on: connection, logger: logger)
            try await Database.notify(.oauthClients, tenantID: tenantID, on: connection, logger: logger)
            return record
        }
    }

    static func decode(_ row: PostgresRow) throws -> OAuthClient {
        var reader = RowReader(row)
        return OAuthClient(
            tenantID: try reader.next(), clientID: try reader.next(), name: try reader.next(), isPublic: try reader.next(),
            redirectURIs: try reader.next(), postLogoutRedirectURIs: try reader.next(), allowLoopback: try reader.next(),
            createdAt: try reader.next(), secretRotatedAt: try reader.next())
    }
}

extension Database {
    public var oauthClients: OAuthClientRepository { OAuthClientRepository(client: client, logger: logger) }
}

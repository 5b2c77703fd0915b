import BrokerCore
import Foundation
import Logging
import PostgresNIO

/// Sessions (refresh-token families) and their rotating refresh tokens.
public struct SessionRepository: Sendable {
    let client: PostgresClient
    let logger: Logger

    /// A live session as the token endpoints see it.
    public struct SessionInfo: Sendable, Equatable {
        public let sessionID: UUID
        public let accountID: UUID
        public let clientID: String?
        public let idp: String
        public let expiresAt: Date
        public let createdAt: Date
    }

    public enum RefreshOutcome: Sendable, Equatable {
        case rotated(SessionInfo)
        /// Unknown, expired or revoked: nothing changed.
        case invalid
        /// An already-rotated token: its whole family has just been revoked.
        case reused
    }

    /// Rotates a refresh token: marks it used and issues its successor, in one statement. Of
    /// two concurrent refreshes of one token exactly one succeeds (the row lock serializes
    /// them and the second sees `used_at` set). A token presented again after rotation revokes
    /// its family.
    public func refresh(
        tenantID: UUID, tokenHash: Data, successor: (id: UUID, hash: Data), idleLifetime: TimeInterval
    ) async throws -> RefreshOutcome {
        let rotation = RotateStatement(
            tenantID: tenantID, tokenHash: tokenHash, successorID: successor.id, successorHash: successor.hash,
            idleLifetime: idleLifetime)
        var rotated: SessionInfo?
        for try await info in try await client.execute(rotation, logger: logger) where rotated == nil { rotated = info }
        if let rotated { return .rotated(rotated) }
        // Nothing rotated: a used token is a replay (or the loser of a race): end the family.
        let revoked = try await client.query(
            """
            UPDATE sessions s SET revoked_at = now(), revoke_reason = 'refresh_token_reuse'
            FROM refresh_tokens rt
            WHERE rt.token_hash = \(tokenHash) AND rt.tenant_id = \(tenantID) AND rt.used_at IS NOT NULL
                AND s.id = rt.session_id AND s.tenant_id = rt.tenant_id AND s.revoked_at IS NULL
            RETURNING s.id
            """, logger: logger)
        return try await revoked.collect().isEmpty ? .invalid : .reused
    }

    /// The rotation, prepared once per connection like the sign-in statement (decision 0006):
    /// every refresh runs it.
    struct RotateStatement: PostgresPreparedStatement {
        typealias Row = SessionInfo

        static let name = "ib_rotate_refresh_token"

        let tenantID: UUID
        let tokenHash: Data
        let successorID: UUID
        let successorHash: Data
        let idleLifetime: TimeInterval

        static let sql = """
            WITH claimed AS (
                UPDATE refresh_tokens rt SET used_at = now()
                FROM sessions s, accounts a
                WHERE rt.token_hash = $1::bytea AND rt.tenant_id = $2::uuid AND rt.used_at IS NULL
                    AND rt.expires_at > now() AND s.id = rt.session_id AND s.tenant_id = rt.tenant_id
                    AND s.revoked_at IS NULL AND s.expires_at > now()
                    AND a.tenant_id = s.tenant_id AND a.id = s.account_id AND a.status = 'active'
                RETURNING rt.id, rt.session_id, s.account_id, s.client_id, s.idp, s.expires_at, s.created_at
            ),
            successor AS (
                INSERT INTO refresh_tokens (id, tenant_id, session_id, parent_id, token_hash, expires_at)
                SELECT $3::uuid, $2::uuid, c.session_id, c.id, $4::bytea,
                    least(now() + make_interval(secs => $5::float8), c.expires_at)
                FROM claimed c
                RETURNING session_id
            ),
            touched AS (
                UPDATE sessions SET last_refreshed_at = now()
                WHERE tenant_id = $2::uuid AND id IN (SELECT session_id FROM successor)
            )
            SELECT session_id, account_id, client_id, idp, expires_at, created_at FROM claimed
            """

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 5)
            try bindings.append(tokenHash)
            bindings.append(tenantID)
            bindings.append(successorID)
            try bindings.append(successorHash)
            bindings.append(idleLifetime)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> SessionInfo {
            let (sessionID, accountID, clientID, idp, expiresAt, createdAt) =
                try row.decode((UUID, UUID, String?, String, Date, Date).self)
            return SessionInfo(
                sessionID: sessionID, accountID: accountID, clientID: clientID, idp: idp, expiresAt: expiresAt,
                createdAt: createdAt)
        }
    }

    /// The session of a refresh token, when the token is live.
    public func introspectRefreshToken(tenantID: UUID, tokenHash: Data) async throws -> SessionInfo? {
        let rows = try await client.query(
            """
            SELECT s.id, s.account_id, s.client_id, s.idp, s.expires_at, s.created_at, rt.expires_at
            FROM refresh_tokens rt JOIN sessions s ON s.id = rt.session_id AND s.tenant_id = rt.tenant_id
            WHERE rt.token_hash = \(tokenHash) AND rt.tenant_id = \(tenantID) AND rt.used_at IS NULL
                AND rt.expires_at > now() AND s.revoked_at IS NULL AND s.expires_at > now()
            """, logger: logger)
        guard let row = try await rows.collect().first else { return nil }
        let (sessionID, accountID, clientID, idp, _, createdAt, tokenExpiresAt) =
            try row.decode((UUID, UUID, String?, String, Date, Date, Date).self)
        return SessionInfo(
            sessionID: sessionID, accountID: accountID, clientID: clientID, idp: idp, expiresAt: tokenExpiresAt,
            createdAt: createdAt)
    }

    /// A session that is neither revoked nor expired.
    public func liveSession(tenantID: UUID, sessionID: UUID) async throws -> SessionInfo? {
        let rows = try await client.query(
            """
            SELECT s.id, s.account_id, s.client_id, s.idp, s.expires_at, s.created_at
            FROM sessions s
            WHERE s.tenant_id = \(tenantID) AND s.id = \(sessionID) AND s.revoked_at IS NULL AND s.expires_at > now()
            """, logger: logger)
        guard let row = try await rows.collect().first else { return nil }
        let (id, accountID, clientID, idp, expiresAt, createdAt) = try row.decode((UUID, UUID, String?, String, Date, Date).self)
        return SessionInfo(
            sessionID: id, accountID: accountID, clientID: clientID, idp: idp, expiresAt: expiresAt, createdAt: createdAt)
    }

    /// Revokes the family a refresh token belongs to; returns whether a live one was found.
    @discardableResult
    public func revokeByRefreshToken(tenantID: UUID, tokenHash: Data, reason: String) async throws -> Bool {
        let rows = try await client.query(
            """
            UPDATE sessions s SET revoked_at = now(), revoke_reason = \(reason)
            FROM refresh_tokens rt
            WHERE rt.token_hash = \(tokenHash) AND rt.tenant_id = \(tenantID) AND s.id = rt.session_id
                AND s.tenant_id = rt.tenant_id AND s.revoked_at IS NULL
            RETURNING s.id
            """, logger: logger)
        return try await !rows.collect().isEmpty
    }

    @discardableResult
    public func revoke(tenantID: UUID, sessionID: UUID, reason: String) async throws -> Bool {
        let rows = try await client.query(
            """
            UPDATE sessions SET revoked_at = now(), revoke_reason = \(reason)
            WHERE tenant_id = \(tenantID) AND id = \(sessionID) AND revoked_at IS NULL
            RETURNING id
            """, logger: logger)
        return try await !rows.collect().isEmpty
    }

    /// Ends every live session of an account; returns how many, or nil when the tenant has no
    /// such account.
    public func revokeAll(tenantID: UUID, accountID: UUID, reason: String) async throws -> Int? {
        let rows = try await client.query(
            """
            WITH account AS (SELECT id FROM accounts WHERE tenant_id = \(tenantID) AND id = \(accountID)),
            ended AS (
                UPDATE sessions SET revoked_at = now(), revoke_reason = \(reason)
                WHERE tenant_id = \(tenantID) AND account_id IN (SELECT id FROM account) AND revoked_at IS NULL
                RETURNING id
            )
            SELECT (SELECT count(*) FROM account)::int, (SELECT count(*) FROM ended)::int
            """, logger: logger)
        guard let row = try await rows.collect().first else { return nil }
        let (found, ended) = try row.decode((Int, Int).self)
        return found == 0 ? nil : ended
    }
}

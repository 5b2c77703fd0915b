import BrokerCore
import Foundation
import Logging
import PostgresNIO

/// The open sessions of one account, as a "signed-in devices" screen lists and ends them
/// (`GET`/`DELETE /v1/accounts/{id}/sessions`, issue 42 §3).
extension SessionRepository {
    /// An open session: neither revoked nor expired. Never a token.
    public struct OpenSession: Sendable, Equatable {
        public let id: UUID
        public let idp: String
        public let clientID: String?
        public let platform: String?
        public let createdAt: Date
        public let lastRefreshedAt: Date?
        public let expiresAt: Date
    }

    /// The `revoke_reason` of a session ended by `DELETE /v1/accounts/{id}/sessions/{session_id}`.
    public static let endedByAPIReason = "revoked"

    /// The account's open sessions, newest first; nil when the tenant has no such account.
    public func openSessions(tenantID: UUID, accountID: UUID) async throws -> [OpenSession]? {
        let rows = try await client.rows(
            """
            WITH account AS (SELECT id FROM accounts WHERE tenant_id = \(tenantID) AND id = \(accountID))
            SELECT s.id, s.idp, s.client_id, s.platform, s.created_at, s.last_refreshed_at, s.expires_at
            FROM account LEFT JOIN sessions s ON s.tenant_id = \(tenantID) AND s.account_id = account.id
                AND s.revoked_at IS NULL AND s.expires_at > now()
            ORDER BY s.created_at DESC, s.id
            """, logger: logger)
        guard !rows.isEmpty else { return nil }
        return try rows.compactMap { row in
            var reader = RowReader(row)
            guard let id: UUID = try reader.next() else { return nil }
            let idp: String? = try reader.next()
            let clientID: String? = try reader.next()
            let platform: String? = try reader.next()
            let createdAt: Date? = try reader.next()
            let lastRefreshedAt: Date? = try reader.next()
            let expiresAt: Date? = try reader.next()
            guard let idp, let createdAt, let expiresAt else { return nil }
            return OpenSession(
                id: id, idp: idp, clientID: clientID, platform: platform, createdAt: createdAt, lastRefreshedAt: lastRefreshedAt,
                expiresAt: expiresAt)
        }
    }

    /// What ending one session found.
    public enum EndOutcome: Sendable, Equatable {
        case ended
        case noAccount
        case noOpenSession
    }

    /// Ends one open session of the account (its refresh family with it) and audits
    /// `session.revoked` in the same transaction.
    public func endSession(tenantID: UUID, accountID: UUID, sessionID: UUID, actor: String) async throws -> EndOutcome {
        try await client.transaction(logger: logger) { connection in
            let rows = try await connection.query(
                """
                WITH account AS (SELECT id FROM accounts WHERE tenant_id = \(tenantID) AND id = \(accountID)),
                ended AS (
                    UPDATE sessions SET revoked_at = now(), revoke_reason = \(Self.endedByAPIReason)
                    WHERE tenant_id = \(tenantID) AND account_id = (SELECT id FROM account) AND id = \(sessionID)
                        AND revoked_at IS NULL AND expires_at > now()
                    RETURNING id
                )
                SELECT (SELECT count(*) FROM account)::int, (SELECT count(*) FROM ended)::int
                """, logger: logger
            ).collect()
            guard let (found, ended) = try rows.first?.decode((Int, Int).self), found == 1 else { return .noAccount }
            guard ended == 1 else { return .noOpenSession }
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: actor, action: "session.revoked", target: sessionID.lowercasedString, on: connection,
                logger: logger)
            return .ended
        }
    }
}

import BrokerCore
import Foundation
import Logging
import PostgresNIO

/// Sessions (refresh-token families): each holds its live refresh token; `refresh_tokens` is
/// the ledger of spent ones (decision 0012).
public struct SessionRepository: Sendable {
    let client: PostgresClient
    let logger: Logger
    /// Rotations written in batches (decision 0074); nil when batching is off.
    var rotations: RefreshRotations? = nil

    /// The `revoke_reason` of the marker row a link writes for the identity token it spent
    /// (decision 0031): a session that never was, revoked from the start.
    public static let linkProofReason = "link_proof"
    /// The `revoke_reason` of the sessions an account's disabling ended.
    public static let accountDisabledReason = "account_disabled"

    /// A live session as the token endpoints see it.
    public struct SessionInfo: Sendable, Equatable {
        public let sessionID: UUID
        public let accountID: UUID
        public let clientID: String?
        public let idp: String
        public let expiresAt: Date
        public let createdAt: Date
        /// The relying party whose session it is, and the scope it was granted (decision 0082);
        /// nil for a session of the REST API.
        public var oauthClientID: String? = nil
        public var oauthScope: String? = nil
    }

    public enum RefreshOutcome: Sendable, Equatable {
        case rotated(SessionInfo)
        /// The token was rotated moments ago (within the reuse interval) and its successor is
        /// still the session's live token: a client's retry, or the loser of two concurrent
        /// refreshes. The same successor stands; nothing changed.
        case repeated(SessionInfo)
        /// Unknown, expired or revoked, or rotated within the reuse interval into a successor
        /// that has itself moved on: nothing changed.
        case invalid
        /// A token rotated longer ago than the reuse interval: its whole family has just been
        /// revoked.
        case reused
    }

    /// The statement of `refresh` (its plan is asserted by HotStatementPlanTests, decision 0014).
    static func reuseRevocationQuery(tenantID: UUID, tokenHash: Data, reuseInterval: TimeInterval) throws -> PostgresQuery {
        try """
        UPDATE sessions s SET revoked_at = now(), revoke_reason = 'refresh_token_reuse'
        WHERE s.tenant_id = \(tenantID) AND s.revoked_at IS NULL AND s.id = (
            SELECT rt.session_id FROM refresh_tokens rt
            WHERE rt.token_hash = \(tokenHash) AND rt.tenant_id = \(tenantID)
                AND rt.used_at <= now() - make_interval(secs => \(reuseInterval)))
        RETURNING s.id
        """
    }

    /// Rotates a refresh token: the session's current token is replaced by `successorHash` and
    /// goes into the ledger of spent tokens, in one statement, in a batch with the rotations
    /// that arrive with it (decision 0074; alone when batches are off). The session's row lock
    /// serializes concurrent rotations of one token: the second no longer finds the token on
    /// the session (in one batch, the second of a session is not posted, which comes to the
    /// same). A token found in the ledger instead is a repeat when it was spent less than
    /// `reuseInterval` seconds ago and `successorHash` is still the session's live token (the
    /// caller derives the successor from the token, so a retry presents the same one: decision
    /// 0017); spent longer ago, it is a replay and revokes its family.
    public func refresh(
        tenantID: UUID, tokenHash: Data, sessionID: UUID?, successorHash: Data, idleLifetime: TimeInterval, reuseInterval: TimeInterval
    ) async throws -> RefreshOutcome {
        let rotation = Rotation(
            tenantID: tenantID, tokenHash: tokenHash, successorHash: successorHash, spentID: .timeOrdered(), idleLifetime: idleLifetime)
        var rotated: SessionInfo?
        if let sessionID {
            let posted = PostedRotation(rotation: rotation, sessionID: sessionID)
            rotated =
                if let rotations { try await rotations.run(posted).get() } else {
                    try await Self.rotate([posted], client: client, logger: logger)[0]
                }
        } else {
            for row in try await client.rows(LegacyRotateStatement(rotation: rotation), logger: logger) where rotated == nil {
                rotated = try RotationSQL.read(row).session
            }
        }
        if let rotated { return .rotated(rotated) }
        if reuseInterval > 0,
            let repeated = try await repeatedRotation(
                tenantID: tenantID, tokenHash: tokenHash, successorHash: successorHash, reuseInterval: reuseInterval)
        {
            return .repeated(repeated)
        }
        // A token spent longer ago than the reuse interval is a replay: end the family.
        let revoked = try await client.rows(
            try Self.reuseRevocationQuery(tenantID: tenantID, tokenHash: tokenHash, reuseInterval: reuseInterval), logger: logger)
        return revoked.isEmpty ? .invalid : .reused
    }

    /// The statement of `private repeatedRotation` (its plan is asserted by HotStatementPlanTests, decision 0014).
    static func repeatedRotationQuery(tenantID: UUID, tokenHash: Data, successorHash: Data, reuseInterval: TimeInterval) throws
        -> PostgresQuery
    {
        try """
        SELECT \(unescaped: sessionColumns)
        FROM sessions s
        WHERE s.refresh_token_hash = \(successorHash) AND s.tenant_id = \(tenantID)
            AND s.refresh_token_expires_at > now() AND s.revoked_at IS NULL AND s.expires_at > now()
            AND s.id = (
                SELECT rt.session_id FROM refresh_tokens rt
                WHERE rt.token_hash = \(tokenHash) AND rt.tenant_id = \(tenantID)
                    AND rt.used_at > now() - make_interval(secs => \(reuseInterval)))
            AND \(unescaped: sessionAccountIsActive)
        """
    }

    /// The session whose live token is `successorHash`, when `tokenHash` was spent on it less
    /// than `reuseInterval` seconds ago and the session is still usable.
    private func repeatedRotation(
        tenantID: UUID, tokenHash: Data, successorHash: Data, reuseInterval: TimeInterval
    ) async throws -> SessionInfo? {
        let rows = try await client.rows(
            try Self.repeatedRotationQuery(
                tenantID: tenantID, tokenHash: tokenHash, successorHash: successorHash, reuseInterval: reuseInterval), logger: logger)
        var session: SessionInfo?
        for row in rows where session == nil {
            var reader = RowReader(row)
            session = try Self.decodeSession(&reader)
        }
        return session
    }

    /// What a rotation posts: the presented token's hash, the tenant, the successor's hash, the
    /// ledger row's id and the successor's idle lifetime.
    struct Rotation: Sendable {
        let tenantID: UUID
        let tokenHash: Data
        let successorHash: Data
        let spentID: UUID
        let idleLifetime: TimeInterval
    }

    /// The columns of `sessions s` that ``decodeSession(_:)`` reads, in its order.
    static let sessionColumns = "s.id, s.account_id, s.client_id, s.idp, s.expires_at, s.created_at, s.oauth_client_id, s.oauth_scope"

    /// A session as the rotation statements and the reads of ``sessionColumns`` return it: its
    /// id, account, client, provider, absolute expiry and opening, and its relying party with
    /// the scope granted, next in `reader`.
    static func decodeSession(_ reader: inout RowReader) throws -> SessionInfo {
        SessionInfo(
            sessionID: try reader.next(), accountID: try reader.next(), clientID: try reader.next(), idp: try reader.next(),
            expiresAt: try reader.next(), createdAt: try reader.next(), oauthClientID: try reader.next(), oauthScope: try reader.next())
    }

    /// Whether the account of session `s` is active, for a statement that reads one session: a
    /// scalar subquery, which PostgreSQL runs per session row with both of the account's keys
    /// bound. Written as `EXISTS`, it became a semi-join in which the tenant, equal to a
    /// parameter, was bound without the join and the account's id only through it, and a plan
    /// made on near-empty tables read every account of the tenant through `(tenant_id, id)`
    /// with only the tenant bound (`HotStatementPlanTests`, decision 0014).
    static let sessionAccountIsActive =
        "(SELECT a.status FROM accounts a WHERE a.tenant_id = s.tenant_id AND a.id = s.account_id) = 'active'"

    /// The statement of `introspectRefreshToken` (its plan is asserted by HotStatementPlanTests, decision 0014).
    static func introspectRefreshTokenQuery(tenantID: UUID, tokenHash: Data, sessionID: UUID?) throws -> PostgresQuery {
        let live = """
            s.refresh_token_expires_at > now() AND s.revoked_at IS NULL AND s.expires_at > now()
                AND \(sessionAccountIsActive)
            """
        guard let sessionID else {
            return try """
            SELECT s.id, s.account_id, s.client_id, s.idp, s.created_at, s.refresh_token_expires_at
            FROM sessions s
            WHERE s.legacy_refresh_token_hash = \(tokenHash) AND s.refresh_token_legacy AND s.tenant_id = \(tenantID) AND \(unescaped: live)
            """
        }
        return try """
        SELECT s.id, s.account_id, s.client_id, s.idp, s.created_at, s.refresh_token_expires_at
        FROM sessions s
        WHERE s.id = \(sessionID) AND s.refresh_token_hash = \(tokenHash) AND s.tenant_id = \(tenantID) AND \(unescaped: live)
        """
    }

    /// The session of a refresh token, when the token is its live one and its account is active.
    /// The account is checked, not only the session's revocation: a session opened in a race
    /// with the account's disabling escapes that revocation, never this check.
    public func introspectRefreshToken(tenantID: UUID, tokenHash: Data, sessionID: UUID?) async throws -> SessionInfo? {
        let rows = try await client.rows(
            try Self.introspectRefreshTokenQuery(tenantID: tenantID, tokenHash: tokenHash, sessionID: sessionID), logger: logger)
        guard let row = rows.first else { return nil }
        let (sessionID, accountID, clientID, idp, createdAt, tokenExpiresAt) =
            try row.decode((UUID, UUID, String?, String, Date, Date).self)
        return SessionInfo(
            sessionID: sessionID, accountID: accountID, clientID: clientID, idp: idp, expiresAt: tokenExpiresAt,
            createdAt: createdAt)
    }

    /// The statement of `liveSession` (its plan is asserted by HotStatementPlanTests, decision 0014).
    static func liveSessionQuery(tenantID: UUID, sessionID: UUID) -> PostgresQuery {
        """
        SELECT \(unescaped: sessionColumns)
        FROM sessions s
        WHERE s.tenant_id = \(tenantID) AND s.id = \(sessionID) AND s.revoked_at IS NULL AND s.expires_at > now()
            AND \(unescaped: sessionAccountIsActive)
        """
    }

    /// A session that is neither revoked nor expired, of an active account.
    public func liveSession(tenantID: UUID, sessionID: UUID) async throws -> SessionInfo? {
        let rows = try await client.rows(Self.liveSessionQuery(tenantID: tenantID, sessionID: sessionID), logger: logger)
        guard let row = rows.first else { return nil }
        var reader = RowReader(row)
        return try Self.decodeSession(&reader)
    }

    /// The relying party a session is for and the scope it was granted (decision 0082): nil
    /// when the tenant has no such session; `clientID` nil for a session of the REST API.
    public func relyingParty(tenantID: UUID, sessionID: UUID) async throws -> (clientID: String?, scope: String?)? {
        let rows = try await client.rows(
            "SELECT oauth_client_id, oauth_scope FROM sessions WHERE tenant_id = \(tenantID) AND id = \(sessionID)", logger: logger)
        guard let row = rows.first else { return nil }
        var reader = RowReader(row)
        return (try reader.next(), try reader.next())
    }

    /// The statement of `revokeByRefreshToken` (its plan is asserted by HotStatementPlanTests, decision 0014).
    static func revokeByRefreshTokenQuery(tenantID: UUID, tokenHash: Data, sessionID: UUID?, reason: String) throws -> PostgresQuery {
        // The session's id is one scalar subquery, so one parameter: behind the tenant wall a
        // condition the planner cannot prove leaks nothing (`coalesce` of two subqueries) is
        // not used before the wall's own, and the session was read by a sequential scan.
        guard let sessionID else {
            return try """
            UPDATE sessions s SET revoked_at = now(), revoke_reason = \(reason)
            WHERE s.tenant_id = \(tenantID) AND s.revoked_at IS NULL
                AND s.id = (SELECT coalesce(
                    (SELECT live.id FROM sessions live
                        WHERE live.legacy_refresh_token_hash = \(tokenHash) AND live.refresh_token_legacy AND live.tenant_id = \(tenantID)),
                    (SELECT rt.session_id FROM refresh_tokens rt
                        WHERE rt.token_hash = \(tokenHash) AND rt.tenant_id = \(tenantID))))
            RETURNING s.id
            """
        }
        // The session the token names, when the token is its live one or one it spent.
        return try """
        UPDATE sessions s SET revoked_at = now(), revoke_reason = \(reason)
        WHERE s.id = \(sessionID) AND s.tenant_id = \(tenantID) AND s.revoked_at IS NULL
            AND (s.refresh_token_hash = \(tokenHash) OR EXISTS (
                SELECT 1 FROM refresh_tokens rt
                WHERE rt.token_hash = \(tokenHash) AND rt.tenant_id = \(tenantID) AND rt.session_id = \(sessionID)))
        RETURNING s.id
        """
    }

    /// Revokes the family a refresh token belongs to, whether the token is the session's live
    /// one or already spent; returns whether a live family was found.
    @discardableResult
    public func revokeByRefreshToken(tenantID: UUID, tokenHash: Data, sessionID: UUID?, reason: String) async throws -> Bool {
        let rows = try await client.rows(
            try Self.revokeByRefreshTokenQuery(tenantID: tenantID, tokenHash: tokenHash, sessionID: sessionID, reason: reason),
            logger: logger)
        return !rows.isEmpty
    }

    /// The statement of `revoke` (its plan is asserted by HotStatementPlanTests, decision 0014).
    static func revokeQuery(tenantID: UUID, sessionID: UUID, reason: String) -> PostgresQuery {
        """
        UPDATE sessions SET revoked_at = now(), revoke_reason = \(reason)
        WHERE tenant_id = \(tenantID) AND id = \(sessionID) AND revoked_at IS NULL
        RETURNING id
        """
    }

    @discardableResult
    public func revoke(tenantID: UUID, sessionID: UUID, reason: String) async throws -> Bool {
        let rows = try await client.rows(Self.revokeQuery(tenantID: tenantID, sessionID: sessionID, reason: reason), logger: logger)
        return !rows.isEmpty
    }

    /// The statement of `revokeAll` (its plan is asserted by HotStatementPlanTests, decision 0014).
    static func revokeAllQuery(tenantID: UUID, accountID: UUID, reason: String) -> PostgresQuery {
        """
        WITH account AS (SELECT id FROM accounts WHERE tenant_id = \(tenantID) AND id = \(accountID)),
        ended AS (
            UPDATE sessions SET revoked_at = now(), revoke_reason = \(reason)
            WHERE tenant_id = \(tenantID) AND account_id = (SELECT id FROM account) AND revoked_at IS NULL
            RETURNING id
        )
        SELECT (SELECT count(*) FROM account)::int, (SELECT count(*) FROM ended)::int
        """
    }

    /// Ends every live session of an account; returns how many, or nil when the tenant has no
    /// such account.
    public func revokeAll(tenantID: UUID, accountID: UUID, reason: String) async throws -> Int? {
        let rows = try await client.rows(Self.revokeAllQuery(tenantID: tenantID, accountID: accountID, reason: reason), logger: logger)
        guard let row = rows.first else { return nil }
        let (found, ended) = try row.decode((Int, Int).self)
        return found == 0 ? nil : ended
    }
}

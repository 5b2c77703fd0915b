import BrokerCore
import Crypto
import Foundation
import JWTKit
import Logging
import Storage

/// Why a refresh token was not honoured: unknown, expired, revoked, or already used (which
/// ends its session). RFC 6749 `invalid_grant`.
package struct InvalidGrant: Error, Sendable {}

/// What introspection says of an active token (RFC 7662).
package struct Introspection: Sendable {
    package enum TokenType: String, Sendable {
        case accessToken = "access_token"
        case refreshToken = "refresh_token"
    }

    package let accountID: String
    package let sessionID: String
    package let expiresAt: Date
    package let issuedAt: Date
    package let issuer: String
    package let audiences: [String]
    package let clientID: String?
    package let tokenType: TokenType
    package let idp: String
}

/// Broker sessions after sign-in: refresh (RFC 6749 §6), revocation (RFC 7009), introspection
/// (RFC 7662). Used by the HTTP handlers; later by account deletion and Apple's notifications.
package struct SessionService: Sendable {
    package let database: Database
    package let tokens: SessionTokens
    /// Seconds during which a just-rotated refresh token still yields its successor.
    package let refreshReuseInterval: TimeInterval
    /// Derives each refresh token's successor (decision 0017).
    package let successorKey: SymmetricKey

    /// Rotates the refresh token: the successor and a new access token. A retry within the
    /// reuse interval gets the same successor; a later reuse revokes the whole session.
    package func refresh(tenant: Tenant, refreshToken value: String, context: OperationContext) async throws -> IssuedSession {
        guard let presented = RefreshToken(parsing: value) else { throw InvalidGrant() }
        // The successor is derived from the presented token, so a retry within the reuse
        // interval is answered with the same one (decision 0017).
        let successor = presented.successor(key: successorKey)
        let signer = try await tokens.signer(for: tenant)
        let outcome = try await database.sessions.refresh(
            tenantID: tenant.id, tokenHash: presented.hash, sessionID: presented.sessionID, successorHash: successor.hash,
            idleLifetime: TimeInterval(tenant.session.refreshTokenIdleTTL), reuseInterval: refreshReuseInterval)
        let session: SessionRepository.SessionInfo
        switch outcome {
        case .rotated(let rotated), .repeated(let rotated):
            session = rotated
        case .reused:
            context.logger.notice("refresh token reused: session family revoked")
            throw InvalidGrant()
        case .invalid:
            throw InvalidGrant()
        }
        // A relying party's session names that client and its scope (decision 0082).
        let access = try await tokens.accessToken(
            tenant: tenant, accountID: session.accountID, sessionID: session.sessionID, idp: session.idp,
            clientID: session.oauthClientID ?? session.clientID, scope: session.oauthScope, signer: signer)
        return IssuedSession(accessToken: access.token, expiresIn: access.expiresIn, refreshToken: successor, session: session)
    }

    /// Ends the session of a refresh or access token of the tenant; any other token is ignored
    /// (RFC 7009 §2.2).
    package func revoke(tenant: Tenant, token: String) async throws {
        let sessions = database.sessions
        if let refresh = RefreshToken(parsing: token) {
            try await sessions.revokeByRefreshToken(
                tenantID: tenant.id, tokenHash: refresh.hash, sessionID: refresh.sessionID, reason: "revoked")
        } else if let claims = await tokens.verifyAccessToken(token, tenant: tenant), let sessionID = UUID(uuidString: claims.sid) {
            try await sessions.revoke(tenantID: tenant.id, sessionID: sessionID, reason: "revoked")
        }
    }

    /// What the token grants while its session is live; nil when it is inactive.
    package func introspect(tenant: Tenant, token: String) async throws -> Introspection? {
        let sessions = database.sessions
        if let refresh = RefreshToken(parsing: token) {
            guard
                let session = try await sessions.introspectRefreshToken(
                    tenantID: tenant.id, tokenHash: refresh.hash, sessionID: refresh.sessionID)
            else {
                return nil
            }
            return Introspection(
                accountID: session.accountID.lowercasedString, sessionID: session.sessionID.lowercasedString,
                expiresAt: session.expiresAt, issuedAt: session.createdAt, issuer: tokens.issuer(for: tenant),
                audiences: tenant.effectiveAudiences, clientID: session.clientID, tokenType: .refreshToken, idp: session.idp)
        }
        guard let claims = await tokens.verifyAccessToken(token, tenant: tenant), let sessionID = UUID(uuidString: claims.sid),
            try await sessions.liveSession(tenantID: tenant.id, sessionID: sessionID) != nil
        else { return nil }
        return Introspection(
            accountID: claims.sub.value, sessionID: claims.sid, expiresAt: claims.exp.value, issuedAt: claims.iat.value,
            issuer: claims.iss.value, audiences: claims.aud.value, clientID: claims.clientID, tokenType: .accessToken,
            idp: claims.idp)
    }
}

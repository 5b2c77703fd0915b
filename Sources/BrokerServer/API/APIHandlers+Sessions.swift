import BrokerAPI
import BrokerCore
import Foundation
import HTTPTypes
import JWTKit
import Logging
import Storage

/// Refresh (RFC 6749 §6), revocation (RFC 7009) and introspection (RFC 7662).
extension APIHandlers {
    static let invalidGrant = BrokerError(
        code: "invalid_grant", kind: .badRequest, title: "Invalid refresh token",
        detail: "The refresh token is unknown, expired, revoked, or was already used (which ends its session).",
        hint: "Sign the person in again.")

    func refreshSession(_ input: Operations.RefreshSession.Input) async throws -> Operations.RefreshSession.Output {
        let caller = try await authenticator.authenticateCurrentRequest(requiring: .sessions)
        let request: Components.Schemas.RefreshRequest =
            switch input.body {
            case .json(let body), .urlEncodedForm(let body): body
            }
        guard let presented = RefreshToken(parsing: request.refreshToken) else { throw Self.invalidGrant }
        let tenant = caller.tenant
        // The successor is derived from the presented token, so a retry within the reuse
        // interval is answered with the same one (decision 0017).
        let successor = presented.successor(key: services.refreshSuccessorKey)
        let outcome = try await services.database.sessions.refresh(
            tenantID: tenant.id, tokenHash: presented.hash, successorHash: successor.hash,
            idleLifetime: TimeInterval(tenant.session.refreshTokenIdleTTL), reuseInterval: services.refreshReuseInterval)
        let session: SessionRepository.SessionInfo
        switch outcome {
        case .rotated(let rotated), .repeated(let rotated):
            session = rotated
        case .reused:
            RequestInfo.current?.logger.notice("refresh token reused: session family revoked")
            throw Self.invalidGrant
        case .invalid:
            throw Self.invalidGrant
        }
        let tokens = services.sessionTokens
        let access = try await tokens.accessToken(
            tenant: tenant, accountID: session.accountID, sessionID: session.sessionID, idp: session.idp,
            clientID: session.clientID)
        // The body carries tokens (RFC 6749 §5.1).
        RequestInfo.setResponseHeader(.cacheControl, "no-store")
        return .ok(.init(body: .json(tokens.response(accessToken: access.token, expiresIn: access.expiresIn, refreshToken: successor))))
    }

    func revokeSession(_ input: Operations.RevokeSession.Input) async throws -> Operations.RevokeSession.Output {
        let caller = try await authenticator.authenticateCurrentRequest(requiring: .sessions)
        let request: Components.Schemas.TokenRequest =
            switch input.body {
            case .json(let body), .urlEncodedForm(let body): body
            }
        let sessions = services.database.sessions
        if let refresh = RefreshToken(parsing: request.token) {
            try await sessions.revokeByRefreshToken(tenantID: caller.tenant.id, tokenHash: refresh.hash, reason: "revoked")
        } else if let claims = await services.sessionTokens.verifyAccessToken(request.token, tenant: caller.tenant),
            let sessionID = UUID(uuidString: claims.sid)
        {
            try await sessions.revoke(tenantID: caller.tenant.id, sessionID: sessionID, reason: "revoked")
        }
        // RFC 7009 §2.2: 200 whether or not the token was valid.
        return .ok(.init())
    }

    func introspectSession(_ input: Operations.IntrospectSession.Input) async throws -> Operations.IntrospectSession.Output {
        let caller = try await authenticator.authenticateCurrentRequest(requiring: .sessions)
        // What a token grants is not for caches (RFC 7662 §4 and RFC 6749 §5.1).
        RequestInfo.setResponseHeader(.cacheControl, "no-store")
        let tenant = caller.tenant
        let request: Components.Schemas.TokenRequest =
            switch input.body {
            case .json(let body), .urlEncodedForm(let body): body
            }
        let inactive = Operations.IntrospectSession.Output.ok(.init(body: .json(.init(active: false))))
        let sessions = services.database.sessions
        let issuer = services.issuer(for: tenant.slug)
        if let refresh = RefreshToken(parsing: request.token) {
            guard let session = try await sessions.introspectRefreshToken(tenantID: tenant.id, tokenHash: refresh.hash) else {
                return inactive
            }
            return .ok(
                .init(
                    body: .json(
                        .init(
                            active: true, sub: session.accountID.lowercasedString,
                            sid: session.sessionID.lowercasedString, exp: Int(session.expiresAt.timeIntervalSince1970),
                            iat: Int(session.createdAt.timeIntervalSince1970), iss: issuer, aud: tenant.effectiveAudiences,
                            clientId: session.clientID, tokenType: .refreshToken, idp: session.idp))))
        }
        guard let claims = await services.sessionTokens.verifyAccessToken(request.token, tenant: tenant),
            let sessionID = UUID(uuidString: claims.sid),
            try await sessions.liveSession(tenantID: tenant.id, sessionID: sessionID) != nil
        else { return inactive }
        return .ok(
            .init(
                body: .json(
                    .init(
                        active: true, sub: claims.sub.value, sid: claims.sid, exp: Int(claims.exp.value.timeIntervalSince1970),
                        iat: Int(claims.iat.value.timeIntervalSince1970), iss: claims.iss.value, aud: claims.aud.value,
                        clientId: claims.clientID, tokenType: .accessToken, idp: claims.idp))))
    }
}

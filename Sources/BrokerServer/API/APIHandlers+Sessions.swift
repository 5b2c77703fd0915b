import BrokerAPI
import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import JWTKit
import Logging
import Storage

/// Refresh (RFC 6749 §6), revocation (RFC 7009) and introspection (RFC 7662).
extension APIHandlers {
    static let invalidGrant = BrokerError(
        code: "invalid_grant", kind: .invalidInput, title: "Invalid refresh token",
        detail: "The refresh token is unknown, expired, revoked, or was already used (which ends its session).",
        hint: "Sign the person in again.")

    /// `TokenRequest.token`'s `maxLength` (the generated decoders do not check lengths).
    static func checkTokenLength(_ token: String) throws {
        guard token.utf8.count <= 16_384 else {
            throw SignInRoute.contractMismatch("'token' is longer than 16384 characters")
        }
    }

    func refreshSession(_ input: Operations.RefreshSession.Input) async throws -> Operations.RefreshSession.Output {
        let http = currentCaller
        let caller = try await authenticator.authenticate(http, requiring: .sessions)
        let request: Components.Schemas.RefreshRequest =
            switch input.body {
            case .json(let body), .urlEncodedForm(let body): body
            }
        let session: IssuedSession
        do {
            session = try await services.sessions.refresh(tenant: caller.tenant, refreshToken: request.refreshToken, context: http.context)
        } catch is InvalidGrant {
            throw Self.invalidGrant
        }
        // The body carries tokens (RFC 6749 §5.1).
        RequestInfo.setResponseHeader(.cacheControl, "no-store")
        return .ok(.init(body: .json(.init(session))))
    }

    func revokeSession(_ input: Operations.RevokeSession.Input) async throws -> Operations.RevokeSession.Output {
        let http = currentCaller
        let caller = try await authenticator.authenticate(http, requiring: .sessions)
        let request: Components.Schemas.TokenRequest =
            switch input.body {
            case .json(let body), .urlEncodedForm(let body): body
            }
        try Self.checkTokenLength(request.token)
        try await services.sessions.revoke(tenant: caller.tenant, token: request.token)
        // RFC 7009 §2.2: 200 whether or not the token was valid.
        return .ok(.init())
    }

    func introspectSession(_ input: Operations.IntrospectSession.Input) async throws -> Operations.IntrospectSession.Output {
        let http = currentCaller
        let caller = try await authenticator.authenticate(http, requiring: .sessions)
        // What a token grants is not for caches (RFC 7662 §4 and RFC 6749 §5.1).
        RequestInfo.setResponseHeader(.cacheControl, "no-store")
        let request: Components.Schemas.TokenRequest =
            switch input.body {
            case .json(let body), .urlEncodedForm(let body): body
            }
        try Self.checkTokenLength(request.token)
        guard let found = try await services.sessions.introspect(tenant: caller.tenant, token: request.token) else {
            return .ok(.init(body: .json(.init(active: false))))
        }
        return .ok(
            .init(
                body: .json(
                    .init(
                        active: true, sub: found.accountID, sid: found.sessionID, exp: Int(found.expiresAt.timeIntervalSince1970),
                        iat: Int(found.issuedAt.timeIntervalSince1970), iss: found.issuer, aud: found.audiences,
                        clientId: found.clientID, tokenType: found.tokenType == .accessToken ? .accessToken : .refreshToken,
                        idp: found.idp))))
    }
}

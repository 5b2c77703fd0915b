import BrokerCore
import Foundation
import JWTKit
import Storage

/// Issues and checks broker tokens: ES256 access tokens signed with the tenant's active key,
/// opaque rotating refresh tokens stored as hashes.
package struct SessionTokens: Sendable {
    package let keys: TenantSigningKeys
    package let publicURL: String

    package func issuer(for tenant: Tenant) -> String { "\(publicURL)/t/\(tenant.slug.rawValue)" }

    /// A fresh session for a sign-in: the row to store. Its refresh token is issued
    /// (``NewSession/issueRefreshToken()``) once its id is final.
    package func newSession(for tenant: Tenant, now: Date = Date()) -> NewSession {
        let absolute = now.addingTimeInterval(TimeInterval(tenant.session.refreshTokenAbsoluteTTL))
        let idle = min(absolute, now.addingTimeInterval(TimeInterval(tenant.session.refreshTokenIdleTTL)))
        return NewSession(id: .timeOrdered(at: now), refreshTokenHash: Data(), expiresAt: absolute, refreshTokenExpiresAt: idle)
    }

    /// The tenant's current signing key, opened. A request that commits and then signs takes it
    /// before it commits: a key that cannot be opened then fails the request with nothing
    /// written, never after its answer was committed (issue 39 B8).
    package func signer(for tenant: Tenant, now: Date = Date()) async throws -> (collection: JWTKeyCollection, kid: String) {
        let (collection, kid) = try await keys.signer(for: tenant, now: now)
        return (collection, kid)
    }

    package func accessToken(
        tenant: Tenant, accountID: UUID, sessionID: UUID, idp: String, clientID: String?, scope: String? = nil, now: Date = Date(),
        signer: (collection: JWTKeyCollection, kid: String)? = nil
    ) async throws -> (token: String, expiresIn: Int) {
        let ttl = tenant.session.accessTokenTTL
        // NumericDates in whole seconds: stock libraries compare `iat` with integer time and
        // call a fractional one "issued in the future".
        let issuedAt = Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down))
        let claims = AccessTokenClaims(
            iss: .init(value: issuer(for: tenant)), sub: .init(value: accountID.lowercasedString),
            aud: .init(value: tenant.effectiveAudiences), exp: .init(value: issuedAt.addingTimeInterval(TimeInterval(ttl))),
            iat: .init(value: issuedAt), jti: .init(value: UUID.random().lowercasedString),
            sid: sessionID.lowercasedString, idp: idp, amr: [idp], clientID: clientID, scope: scope)
        let (collection, kid): (JWTKeyCollection, String)
        if let signer { (collection, kid) = signer } else { (collection, kid) = try await self.signer(for: tenant, now: now) }
        var header = JWTHeader()
        header.typ = "at+jwt"
        return (try await collection.sign(claims, kid: JWKIdentifier(string: kid), header: header), ttl)
    }

    /// The claims of a well-signed, unexpired access token of this tenant, else nil.
    package func verifyAccessToken(_ token: String, tenant: Tenant) async -> AccessTokenClaims? {
        // jwt-kit's decoder also takes padding and the standard alphabet; only the one canonical
        // spelling of a token we issued is accepted (issue 9 §4).
        guard token.utf8.count <= 8_192, Base64URL.isCanonicalCompactJWS(token) else { return nil }
        do {
            let collection = try await keys.verifier(for: tenant)
            let claims = try await collection.verify(token, as: AccessTokenClaims.self)
            guard claims.iss.value == issuer(for: tenant) else { return nil }
            return claims
        } catch {
            return nil
        }
    }
}

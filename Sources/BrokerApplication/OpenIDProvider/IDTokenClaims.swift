import BrokerCore
import Crypto
import Foundation
import JWTKit

/// The claims of an ID token of a tenant's OpenID Provider (OpenID Connect Core §2, decision
/// 0082), ES256 with the tenant's signing key: `sub` the account id, `aud` the client, `idp` the
/// upstream provider (as Entra ID's tokens carry it), `at_hash` of the access token answered
/// with it, `nonce` when the authorization request had one; `email` and `email_verified` with
/// the `email` scope, the name with `profile`. NumericDates are whole seconds.
package struct IDTokenClaims: JWTPayload, Equatable {
    package var iss: IssuerClaim
    package var sub: SubjectClaim
    package var aud: AudienceClaim
    package var exp: ExpirationClaim
    package var iat: IssuedAtClaim
    package var authTime: Int
    package var nonce: String?
    package var atHash: String
    package var idp: String
    package var sid: String
    package var email: String?
    package var emailVerified: Bool?
    package var name: String?
    package var givenName: String?
    package var familyName: String?

    package enum CodingKeys: String, CodingKey, CaseIterable {
        case iss, sub, aud, exp, iat, nonce, idp, sid, email, name
        case authTime = "auth_time"
        case atHash = "at_hash"
        case emailVerified = "email_verified"
        case givenName = "given_name"
        case familyName = "family_name"

        /// Every claim's name (discovery's `claims_supported`).
        package static var allNames: [String] { allCases.map(\.rawValue) }
    }

    package func verify(using algorithm: some JWTAlgorithm) async throws {
        try exp.verifyNotExpired()
    }

    /// `at_hash`: the base64url of the left half of the SHA-256 of the access token (ES256's
    /// hash, OpenID Connect Core §3.1.3.6).
    package static func accessTokenHash(_ accessToken: String) -> String {
        Base64URL.encode(Data(SHA256.hash(data: Data(accessToken.utf8))).prefix(16))
    }
}

extension IDTokenClaims {
    /// The members `Codable` would write (``AccessTokenJSONEncoder`` signs with it): NumericDates
    /// as whole seconds, the single audience as a string, optional claims only when set.
    package var json: [UInt8] {
        var writer = JSONWriter(capacity: 512)
        writer.beginObject()
        writer.registeredClaims(iss: iss, sub: sub, aud: aud, exp: exp, iat: iat)
        writer.member("auth_time", authTime)
        writer.memberIfPresent("nonce", nonce)
        writer.member("at_hash", atHash)
        writer.member("idp", idp)
        writer.member("sid", sid)
        writer.memberIfPresent("email", email)
        if let emailVerified { writer.member("email_verified", emailVerified) }
        writer.memberIfPresent("name", name)
        writer.memberIfPresent("given_name", givenName)
        writer.memberIfPresent("family_name", familyName)
        writer.endObject()
        return writer.bytes
    }
}

/// The claims of a person the scopes granted allow (ID token and userinfo alike).
package struct ScopedClaims: Sendable, Equatable {
    package var email: String?
    package var emailVerified: Bool?
    package var name: String?
    package var givenName: String?
    package var familyName: String?

    /// None: a person whose scopes allow nothing more than `sub`.
    package init() {}

    package init(account: Account, scopes: [OAuthScope]) {
        self.init(
            email: account.email, emailVerified: account.emailVerified, givenName: account.name.givenName,
            familyName: account.name.familyName, scopes: scopes)
    }

    /// What the scopes allow of an account with these columns.
    package init(email: String?, emailVerified: Bool, givenName: String?, familyName: String?, scopes: [OAuthScope]) {
        if scopes.contains(.email), let email {
            self.email = email
            self.emailVerified = emailVerified
        }
        if scopes.contains(.profile) {
            self.givenName = givenName
            self.familyName = familyName
            let whole = [givenName, familyName].compactMap { $0 }.joined(separator: " ")
            name = whole.isEmpty ? nil : whole
        }
    }
}

import Foundation
import JWTKit

/// The claims of a broker access token (ES256): `iss` the tenant issuer, `sub` the account
/// id, `aud` the tenant's audiences, `exp`, `iat`, `jti`, `sid` the session, `idp` and `amr`
/// the provider that signed the person in, `client_id` the provider client, or the relying party
/// for a session of the tenant's OpenID Provider, which also carries the granted `scope`
/// (decision 0082).
package struct AccessTokenClaims: JWTPayload, Equatable {
    package var iss: IssuerClaim
    package var sub: SubjectClaim
    package var aud: AudienceClaim
    package var exp: ExpirationClaim
    package var iat: IssuedAtClaim
    package var jti: IDClaim
    package var sid: String
    package var idp: String
    package var amr: [String]
    package var clientID: String?
    package var scope: String? = nil

    package enum CodingKeys: String, CodingKey {
        case iss, sub, aud, exp, iat, jti, sid, idp, amr
        case clientID = "client_id"
        case scope
    }

    package func verify(using algorithm: some JWTAlgorithm) async throws {
        try exp.verifyNotExpired()
    }
}

import Foundation
import JWTKit

/// The claims of a broker access token (ES256): `iss` the tenant issuer, `sub` the account
/// id, `aud` the tenant's audiences, `exp`, `iat`, `jti`, `sid` the session, `idp` and `amr`
/// the provider that signed the person in, `client_id` the provider client.
struct AccessTokenClaims: JWTPayload, Equatable {
    var iss: IssuerClaim
    var sub: SubjectClaim
    var aud: AudienceClaim
    var exp: ExpirationClaim
    var iat: IssuedAtClaim
    var jti: IDClaim
    var sid: String
    var idp: String
    var amr: [String]
    var clientID: String?

    enum CodingKeys: String, CodingKey {
        case iss, sub, aud, exp, iat, jti, sid, idp, amr
        case clientID = "client_id"
    }

    func verify(using algorithm: some JWTAlgorithm) async throws {
        try exp.verifyNotExpired()
    }
}

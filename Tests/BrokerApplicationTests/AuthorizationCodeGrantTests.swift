import BrokerCore
import Foundation
import Testing

@testable import BrokerApplication

/// A relying party's authorization code keeps, sealed, what the token endpoint answers it with
/// (decision 0085): what it writes reads back the same, whatever the person's name and email
/// hold, and nothing else reads as one.
@Suite struct AuthorizationCodeGrantTests {
    static func grant(email: String?, verified: Bool?, given: String?, family: String?, nonce: String?, challenge: String?)
        -> AuthorizationCodeGrant
    {
        var claims = ScopedClaims()
        claims.email = email
        claims.emailVerified = verified
        claims.givenName = given
        claims.familyName = family
        claims.name = [given, family].compactMap { $0 }.joined(separator: " ")
        return AuthorizationCodeGrant(
            relyingParty: AuthorizationCodeGrant.RelyingParty(
                clientID: "ibc_web", redirectURI: "https://app.example.com/callback?x=\"1\"",
                request: KeptClientRequest(
                    issuer: "https://broker.example/t/acme", scopes: [.openid, .email, .profile], nonce: nonce, codeChallenge: challenge),
                authTime: Date(timeIntervalSince1970: 1_795_237_158)),
            accountID: UUID(), sessionID: UUID(), idp: "line", claims: claims)
    }

    @Test(arguments: [
        ("taro@example.com" as String?, true as Bool?, "太郎" as String?, "山田" as String?, "n-1" as String?, "abc" as String?),
        (nil, nil, nil, nil, nil, nil),
        ("a\"b\\c@example.com", false, "Zoë\t", "O'Brien\n", "\u{1F600}", nil),
    ])
    func readsBackWhatItWrote(
        email: String?, verified: Bool?, given: String?, family: String?, nonce: String?, challenge: String?
    ) {
        let grant = Self.grant(email: email, verified: verified, given: given, family: family, nonce: nonce, challenge: challenge)
        #expect(AuthorizationCodeGrant(json: grant.json) == grant)
    }

    @Test func aWebSignInsGrantOrAnythingElseIsNone() {
        #expect(AuthorizationCodeGrant(json: Array("{}".utf8)) == nil)
        #expect(AuthorizationCodeGrant(json: Array("not json".utf8)) == nil)
        var object = String(
            decoding: Self.grant(email: nil, verified: nil, given: nil, family: nil, nonce: nil, challenge: nil).json, as: UTF8.self)
        object = object.replacingOccurrences(of: "\"session_id\":\"", with: "\"session_id\":\"x")
        #expect(AuthorizationCodeGrant(json: Array(object.utf8)) == nil, "a session id that is not one")
    }
}

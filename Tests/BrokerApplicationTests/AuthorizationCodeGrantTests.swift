import BrokerCore
import Foundation
import Testing

@testable import BrokerApplication

/// A relying party's authorization code keeps, sealed, what the token endpoint checks it against
/// (decisions 0085, 0100): what it writes reads back the same, whatever the request holds, a
/// grant an earlier version wrote (with the account and its claims) still reads, and nothing
/// else reads as one.
@Suite struct AuthorizationCodeGrantTests {
    static func grant(nonce: String?, challenge: String?, redirect: String = "https://app.example.com/callback?x=\"1\"")
        -> AuthorizationCodeGrant
    {
        AuthorizationCodeGrant(
            relyingParty: AuthorizationCodeGrant.RelyingParty(
                clientID: "ibc_web", redirectURI: redirect,
                request: KeptClientRequest(
                    issuer: "https://broker.example/t/acme", scopes: [.openid, .email, .profile], nonce: nonce, codeChallenge: challenge),
                authTime: Date(timeIntervalSince1970: 1_795_237_158)),
            sessionID: UUID(), idp: "line")
    }

    @Test(arguments: [
        ("n-1" as String?, "abc" as String?, "https://app.example.com/cb"),
        (nil, nil, "http://127.0.0.1:8080/"),
        ("\u{1F600}\"\\", nil, "https://app.example.com/callback?x=\"1\"&y=太郎"),
    ])
    func readsBackWhatItWrote(nonce: String?, challenge: String?, redirect: String) {
        let grant = Self.grant(nonce: nonce, challenge: challenge, redirect: redirect)
        #expect(AuthorizationCodeGrant(json: grant.json) == grant)
    }

    /// A code an earlier version kept, redeemed across an upgrade (codes live a minute): its
    /// account and claims are left unread, the redemption reads the session's account.
    @Test func aGrantOfTheEarlierFormStillReads() throws {
        let grant = Self.grant(nonce: "n", challenge: "c")
        guard case .object(var members) = try JSONValue.parse(grant.json) else {
            Issue.record("not an object")
            return
        }
        members["account_id"] = .string(UUID().lowercasedString)
        members["claims"] = .object(["email": .string("taro@example.com"), "email_verified": .bool(true), "name": .string("太郎")])
        var writer = JSONWriter(capacity: 512)
        writer.value(.object(members))
        #expect(AuthorizationCodeGrant(json: writer.bytes) == grant)
    }

    @Test func aWebSignInsGrantOrAnythingElseIsNone() {
        #expect(AuthorizationCodeGrant(json: Array("{}".utf8)) == nil)
        #expect(AuthorizationCodeGrant(json: Array("not json".utf8)) == nil)
        var object = String(
            decoding: Self.grant(nonce: nil, challenge: nil).json, as: UTF8.self)
        object = object.replacingOccurrences(of: "\"session_id\":\"", with: "\"session_id\":\"x")
        #expect(AuthorizationCodeGrant(json: Array(object.utf8)) == nil, "a session id that is not one")
    }
}

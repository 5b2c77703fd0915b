import BrokerCore
import Crypto
import Foundation
import PropertyBased
import Testing

/// What the authorization endpoint reads of a relying party's request once its client and
/// redirect URI are known (issue 42 §2, decision 0082), and PKCE's S256 check.
@Suite struct ClientAuthorizationRequestTests {
    static let challenge = Base64URL.encode(Data(SHA256.hash(data: Data(String(repeating: "v", count: 43).utf8))))
    static let good: [String: String] = [
        "response_type": "code", "scope": "openid email", "state": "s", "nonce": "n", "code_challenge": challenge,
        "code_challenge_method": "S256",
    ]

    static func read(_ fields: [String: String], isPublic: Bool = false) -> Result<ClientAuthorizationRequest, AuthorizationError> {
        ClientAuthorizationRequest.read(fields, clientID: "ibc_x", redirectURI: "https://app.example.com/cb", isPublic: isPublic)
    }

    @Test func aGoodRequestReadsWhole() throws {
        let request = try Self.read(Self.good, isPublic: true).get()
        #expect(request.scopes == [.openid, .email])
        #expect(request.state == "s" && request.nonce == "n" && request.codeChallenge == Self.challenge)
        #expect(!request.promptNone && request.provider == nil)
        // Unknown scopes are ignored; the known ones come in one order, once.
        let widened = try Self.read(Self.good.merging(["scope": "offline_access phone openid openid profile"]) { $1 }).get()
        #expect(widened.scopes == [.openid, .profile, .offlineAccess])
    }

    @Test func eachWrongPartIsRefusedWithItsError() {
        let cases: [([String: String?], String)] = [
            (["response_type": nil], "invalid_request"),
            (["response_type": "token"], "unsupported_response_type"),
            (["response_type": "code id_token"], "unsupported_response_type"),
            (["scope": "email profile"], "invalid_scope"),
            (["scope": nil], "invalid_scope"),
            (["code_challenge_method": "plain"], "invalid_request"),
            (["code_challenge_method": nil], "invalid_request"),
            (["code_challenge": "short"], "invalid_request"),
            (["code_challenge": nil], "invalid_request"),
            (["state": String(repeating: "s", count: 513)], "invalid_request"),
            (["state": "a\u{0}b"], "invalid_request"),
            (["nonce": String(repeating: "n", count: 256)], "invalid_request"),
            (["prompt": "none login"], "invalid_request"),
            (["request": "eyJ"], "request_not_supported"),
            (["request_uri": "https://x"], "request_uri_not_supported"),
            (["response_mode": "fragment"], "invalid_request"),
        ]
        for (change, error) in cases {
            var fields = Self.good
            for (name, value) in change { fields[name] = value }
            guard case .failure(let refused) = Self.read(fields) else {
                Issue.record("\(change) was accepted")
                continue
            }
            #expect(refused.error == error, "\(change): \(refused)")
        }
        // A confidential client may leave PKCE out; a public one may not.
        let withoutPKCE = Self.good.filter { !$0.key.hasPrefix("code_challenge") }
        #expect((try? Self.read(withoutPKCE).get()) != nil)
        #expect((try? Self.read(withoutPKCE, isPublic: true).get()) == nil)
    }

    @Test func promptNoneIsReadForTheCallerToRefuse() throws {
        #expect(try Self.read(Self.good.merging(["prompt": "none"]) { $1 }).get().promptNone)
        #expect(try Self.read(Self.good.merging(["prompt": "login consent"]) { $1 }).get().promptLogin)
    }

    /// The kept part travels through the state row and the sealed grant as JSON: what is written
    /// reads back the same for every nonce the endpoint accepts (it refuses control characters,
    /// which the strict JSON parser would refuse as `\u0000`; the first run of this property
    /// found that pair).
    @Test func theKeptRequestReadsBackAsWritten() async {
        await propertyCheck(count: 500, input: Gen<Character>.character(in: "\u{0}"..."\u{3100}").string(of: 0...40), Gen.bool) {
            nonce, withChallenge in
            guard ClientAuthorizationRequest.refusal(of: nonce, named: "nonce", max: ClientAuthorizationRequest.maxNonce) == nil
            else { return }
            let kept = KeptClientRequest(
                issuer: "https://broker.example.com/t/acme", scopes: [.openid, .offlineAccess], nonce: nonce,
                codeChallenge: withChallenge ? Self.challenge : nil)
            #expect(KeptClientRequest(json: kept.json) == kept)
        }
    }

    @Test func pkceVerifiesOnlyItsOwnVerifier() async {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        await propertyCheck(count: 500, input: Gen.int(in: 43...128), Gen.int(in: 0...Int(Int32.max))) { length, seed in
            let verifier = String((0..<length).map { alphabet[(seed &+ $0 &* 7_919) % alphabet.count] })
            let challenge = Base64URL.encode(Data(SHA256.hash(data: Data(verifier.utf8))))
            #expect(PKCE.verifies(verifier, challenge: challenge))
            // One character changed, added or removed: refused.
            var changed = Array(verifier)
            let at = seed % changed.count
            changed[at] = changed[at] == "A" ? "B" : "A"
            #expect(!PKCE.verifies(String(changed), challenge: challenge))
            #expect(!PKCE.verifies(verifier + "A", challenge: challenge) || length == 128)
            #expect(!PKCE.verifies(String(verifier.dropLast()), challenge: challenge))
        }
        // Out of RFC 7636's length or alphabet: refused even when the transform would match.
        for verifier in [String(repeating: "a", count: 42), String(repeating: "a", count: 129), String(repeating: "a", count: 42) + "+"] {
            let challenge = Base64URL.encode(Data(SHA256.hash(data: Data(verifier.utf8))))
            #expect(!PKCE.verifies(verifier, challenge: challenge), "\(verifier.count)")
        }
    }
}

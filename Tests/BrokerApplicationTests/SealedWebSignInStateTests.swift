import BrokerCore
import Foundation
import PropertyBased
import Storage
import Testing

@testable import BrokerApplication

/// A web sign-in sealed into its state (decision 0099): what is sealed opens back the same, for
/// any text the fields may hold; a state changed in any byte, moved to another tenant, spelled
/// another way or sealed under another master key does not open; and its text is of the sealed
/// form, within the length a callback reads.
@Suite struct SealedWebSignInStateTests {
    static let secrets = SecretBox(masterKey: MasterKey.generate().key)

    /// Characters that need escaping in JSON or in a URL, and some that are not ASCII.
    static let alphabet = Array("aZ09-_.~:/?#[]@!$&'()*+,;= \"\\é太\u{1F600}%")
    static let text = Gen.int(in: 0...(alphabet.count - 1)).array(of: 0...40).map { String($0.map { alphabet[$0] }) }
    static let optionalText = Gen.oneOf(text.map { Optional($0) }, Gen.always(String?.none))

    static func state(
        tenant: UUID, returnURL: String, callerState: String?, nonce: String?, relyingParty: Bool, milliseconds: Int
    ) -> WebSignInState {
        WebSignInState(
            stateHash: Data(), tenantID: tenant, provider: "line", clientID: "client-\(returnURL.count)",
            redirectURI: "https://id.example.com/oidc/callback", returnURL: returnURL, intent: relyingParty ? .auto : .signIn,
            callerState: callerState, expiresAt: Date(timeIntervalSince1970: Double(milliseconds) / 1_000),
            providerScope: nonce.map { "scope-\($0)" },
            relyingParty: relyingParty
                ? WebSignInState.RelyingParty(
                    clientID: "ibc_web",
                    request: KeptClientRequest(
                        issuer: "https://id.example.com/t/acme", scopes: [.openid, .email], nonce: nonce, codeChallenge: callerState))
                : nil)
    }

    @Test func whatIsSealedOpensBackTheSame() async throws {
        await propertyCheck(
            count: 1_000, input: Self.text, Self.optionalText, Self.optionalText, Gen.bool(), Gen.int(in: 0...(1 << 45))
        ) { returnURL, callerState, nonce, relyingParty, milliseconds in
            let tenant = UUID()
            let state = Self.state(
                tenant: tenant, returnURL: returnURL, callerState: callerState, nonce: nonce, relyingParty: relyingParty,
                milliseconds: milliseconds)
            guard let text = try? SealedWebSignInState.seal(state, secrets: Self.secrets) else {
                Issue.record("not sealed")
                return
            }
            #expect(text.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }, "base64url only")
            #expect(text.utf8.count > WebSignInStateToken.length && text.utf8.count <= WebSignInStateToken.maxLength)
            #expect(WebSignInStateToken.tenant(of: text) == tenant)
            var expected = state
            expected.stateHash = WebSignInService.hash(text)
            #expect(SealedWebSignInState.open(text, secrets: Self.secrets) == expected)
        }
    }

    @Test func aStateChangedInAnyWayDoesNotOpen() throws {
        let tenant = UUID()
        let state = Self.state(
            tenant: tenant, returnURL: "https://acme.example.com/done", callerState: "s", nonce: "n", relyingParty: true,
            milliseconds: 1_795_237_158_000)
        let text = try SealedWebSignInState.seal(state, secrets: Self.secrets)
        #expect(SealedWebSignInState.open(text, secrets: Self.secrets) != nil)
        // Every character replaced by another of the alphabet.
        let characters = Array(text)
        for index in characters.indices {
            var changed = characters
            changed[index] = changed[index] == "A" ? "B" : "A"
            #expect(SealedWebSignInState.open(String(changed), secrets: Self.secrets) == nil, "character \(index)")
        }
        // Cut short, or longer.
        #expect(SealedWebSignInState.open(String(text.dropLast(4)), secrets: Self.secrets) == nil)
        #expect(SealedWebSignInState.open(text + "AAAA", secrets: Self.secrets) == nil)
        // Moved to another tenant: its tenant part is bound to the seal.
        let other = WebSignInStateToken.make(tenantID: UUID()).prefix(22)
        #expect(SealedWebSignInState.open(String(other) + String(text.dropFirst(22)), secrets: Self.secrets) == nil)
        // Under another master key.
        #expect(SealedWebSignInState.open(text, secrets: SecretBox(masterKey: MasterKey.generate().key)) == nil)
        // A stored state, or the oldest form, is not a sealed one.
        #expect(SealedWebSignInState.open(WebSignInStateToken.make(tenantID: tenant), secrets: Self.secrets) == nil)
        #expect(WebSignInStateToken.sealedBox(of: WebSignInStateToken.make(tenantID: tenant)) == nil)
    }

    /// A box's base64url has one spelling: the same box written with other bits in its last
    /// character would be a second state of one sign-in (two hashes, two rows). Every other last
    /// character reads as another box or as none.
    @Test func noSecondSpellingReadsAsTheSameBox() throws {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        for round in 0..<30 {
            let text = try SealedWebSignInState.seal(
                Self.state(
                    tenant: UUID(), returnURL: "https://a.example/" + String(repeating: "x", count: round), callerState: nil, nonce: nil,
                    relyingParty: false, milliseconds: 1),
                secrets: Self.secrets)
            let box = try #require(WebSignInStateToken.sealedBox(of: text)?.box)
            for replacement in alphabet where replacement != text.last {
                let respelled = String(text.dropLast()) + String(replacement)
                #expect(WebSignInStateToken.sealedBox(of: respelled)?.box != box, "round \(round): \(replacement)")
                #expect(SealedWebSignInState.open(respelled, secrets: Self.secrets) == nil)
            }
        }
    }

    @Test func theLongestStateACallerCanAskForIsReadByTheCallback() throws {
        let long = String(repeating: "\"", count: WebSignInService.maxCallerState)
        let state = WebSignInState(
            stateHash: Data(), tenantID: UUID(), provider: "apple", clientID: String(repeating: "c", count: 255),
            redirectURI: "https://id.example.com/" + String(repeating: "r", count: 1_970),
            returnURL: "https://acme.example.com/" + String(repeating: "u", count: WebSignInService.maxReturnURL - 25),
            intent: .auto, callerState: long, expiresAt: Date(),
            providerScope: "TEAM000001",
            relyingParty: WebSignInState.RelyingParty(
                clientID: "ibc_web",
                request: KeptClientRequest(
                    issuer: "https://id.example.com/t/acme", scopes: [.openid], nonce: String(repeating: "\\", count: 255),
                    codeChallenge: String(repeating: "x", count: 43))))
        let text = try SealedWebSignInState.seal(state, secrets: Self.secrets)
        #expect(text.utf8.count <= WebSignInStateToken.maxLength, "\(text.utf8.count)")
        #expect(SealedWebSignInState.open(text, secrets: Self.secrets) != nil)
    }
}

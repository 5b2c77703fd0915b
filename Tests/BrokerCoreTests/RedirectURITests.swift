import BrokerCore
import Foundation
import PropertyBased
import Testing

/// What a relying party may register as a redirect URI, and how a request's URI is compared
/// with the registered ones (issue 42 §1, decision 0081): exactly, but for a public client's
/// loopback port (RFC 8252 §7.3).
@Suite struct RedirectURITests {
    @Test func whatMayBeRegistered() {
        let accepted: [(String, Bool, Bool)] = [
            ("https://app.example.com/callback", false, false),
            ("https://app.example.com/cb?tenant=acme", false, false),
            ("https://app.example.com", false, false),
            ("http://127.0.0.1:8080/callback", false, true),
            ("http://[::1]:53100/cb", true, true),
            ("com.example.app:/oauth2redirect", true, false),
        ]
        for (uri, isPublic, loopback) in accepted {
            #expect(RedirectURI.refusal(uri, isPublic: isPublic, allowLoopback: loopback) == nil, "\(uri)")
        }
        let refused: [(String, Bool, Bool, String)] = [
            ("http://app.example.com/callback", false, true, "loopback"),
            ("http://127.0.0.1:8080/callback", false, false, "--allow-loopback"),
            ("http://localhost:8080/callback", true, true, "loopback"),
            ("https://app.example.com/cb#fragment", false, false, "fragment"),
            ("https://user:pw@app.example.com/cb", false, false, "user name"),
            ("com.example.app:/oauth2redirect", false, false, "confidential"),
            ("myapp:/callback", true, false, "reverse domain"),
            ("/callback", false, false, "absolute"),
            ("https://app.example.com/a b", false, false, "printable"),
            ("HTTPS://app.example.com/cb", false, false, "absolute"),
            ("https:///cb", false, false, "host"),
            ("", false, false, "1 to"),
            ("https://app.example.com/" + String(repeating: "a", count: 2_000), false, false, "1 to"),
        ]
        for (uri, isPublic, loopback, reason) in refused {
            let refusal = RedirectURI.refusal(uri, isPublic: isPublic, allowLoopback: loopback)
            #expect(refusal?.contains(reason) == true, "\(uri.prefix(60)): \(refusal ?? "accepted")")
        }
    }

    static let registered = [
        "https://app.example.com/callback", "https://app.example.com/cb?x=1", "com.example.app:/oauth2redirect",
        "http://127.0.0.1:8080/callback", "http://[::1]:9000/cb",
    ]
    static let characters = Array("abcXYZ019/:?=&.%-_~#@[]")

    /// A registered URI with one character changed, added or removed never matches, for either
    /// kind of client (loopback ports aside, below): no prefix, no case folding, no normalising.
    @Test func aURIOneCharacterAwayNeverMatches() async {
        // One seed picks the URI, the kind of edit, where and which character.
        await propertyCheck(count: 3_000, input: Gen.int(in: 0...Int(Int32.max)), Gen.bool) { seed, isPublic in
            let uri = Array(Self.registered[seed % Self.registered.count])
            let at = (seed / 31) % uri.count
            let character = Self.characters[(seed / 1_009) % Self.characters.count]
            var changed = uri
            switch (seed / 7) % 3 {
            case 0: changed[at] = character
            case 1: changed.insert(character, at: at)
            default: changed.remove(at: at)
            }
            let edited = String(changed)
            guard !Self.registered.contains(edited) else { return }
            let matched = RedirectURI.matches(edited, registered: Self.registered, isPublic: isPublic)
            // Only a public client's loopback URI with a different port may match.
            if matched {
                #expect(isPublic && (edited.hasPrefix("http://127.0.0.1") || edited.hasPrefix("http://[::1]")), "\(edited)")
                let withoutPort = { (text: String) in text.replacing(/([0-9\]]):[0-9]*\//, with: { "\($0.output.1)/" }) }
                #expect(Self.registered.map(withoutPort).contains(withoutPort(edited)), "\(edited)")
            }
        }
    }

    @Test func eachRegisteredURIMatchesItself() {
        for uri in Self.registered {
            #expect(RedirectURI.matches(uri, registered: Self.registered, isPublic: false))
            #expect(RedirectURI.matches(uri, registered: Self.registered, isPublic: true))
        }
        #expect(!RedirectURI.matches("https://app.example.com/callback", registered: [], isPublic: true))
    }

    /// RFC 8252 §7.3: a public client's loopback URI matches on any port (the app's listener takes
    /// what the system gives it); the host, path and query stay exact, and a confidential
    /// client's port is compared.
    @Test func aPublicClientsLoopbackPortIsNotCompared() async {
        await propertyCheck(count: 500, input: Gen.int(in: 1...65_535)) { port in
            #expect(RedirectURI.matches("http://127.0.0.1:\(port)/callback", registered: Self.registered, isPublic: true))
            #expect(RedirectURI.matches("http://[::1]:\(port)/cb", registered: Self.registered, isPublic: true))
            #expect(
                RedirectURI.matches("http://127.0.0.1:\(port)/callback", registered: Self.registered, isPublic: false) == (port == 8080))
        }
        #expect(RedirectURI.matches("http://127.0.0.1/callback", registered: Self.registered, isPublic: true))
        #expect(!RedirectURI.matches("http://127.0.0.1:5000/callback/", registered: Self.registered, isPublic: true))
        #expect(!RedirectURI.matches("http://127.0.0.1:5000/cb", registered: Self.registered, isPublic: true))
        #expect(!RedirectURI.matches("http://[::1]:5000/callback", registered: Self.registered, isPublic: true))
        #expect(!RedirectURI.matches("https://127.0.0.1:8080/callback", registered: Self.registered, isPublic: true))
        // Found by the generated edits above: user information or a fragment is no port.
        #expect(!RedirectURI.matches("http://@[::1]:9000/cb", registered: Self.registered, isPublic: true))
        #expect(!RedirectURI.matches("http://user@127.0.0.1:5000/callback", registered: Self.registered, isPublic: true))
        #expect(!RedirectURI.matches("http://127.0.0.1:5000/callback#x", registered: Self.registered, isPublic: true))
    }

    @Test func clientIDsAndSecretsHaveTheirShape() {
        for _ in 0..<200 {
            let id = OAuthClient.newClientID()
            #expect(OAuthClient.isClientID(id), "\(id)")
            let secret = ClientSecret.generate()
            #expect(secret.value.hasPrefix("ibcs_") && secret.value.count == 48)
            #expect(secret.hash == ClientSecret.hash(secret.value) && secret.hash.count == 32)
        }
        #expect(!OAuthClient.isClientID("ibc_short"))
        #expect(!OAuthClient.isClientID("ibc_" + String(repeating: "a", count: 21) + "!"))
        #expect(!OAuthClient.isClientID("IBC_" + String(repeating: "a", count: 22)))
    }
}

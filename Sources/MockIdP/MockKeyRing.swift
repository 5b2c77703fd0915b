import Crypto
import Foundation
import JWTKit
import Synchronization
import _CryptoExtras

/// How a mock provider's key set endpoint answers.
public enum MockKeysFault: Sendable, Equatable {
    /// The published keys (no fault).
    case none
    /// 503 with no body, as when the provider is down.
    case unavailable
    /// 200 with `{"keys": []}`.
    case emptySet
    /// 200 with a body that is not a key set.
    case malformed
    /// Exactly this answer (a mutated key set: odd members, wrong types, huge arrays).
    case answer(status: Int, body: Data)
    /// The published keys, the head at once and then the body one byte a second.
    case slowBody
}

/// The signing keys of one mock provider: the signing key, the published kids, a never-published
/// key for `.unpublishedKey`, the key set endpoint's fault, and the token minting all three
/// mocks share.
public final class MockKeyRing: Sendable {
    private struct State {
        var keys: [MockSigningKey]
        /// kids served in the key set.
        var published: [String]
        var stranger: MockSigningKey?
        var fault = MockKeysFault.none
        var fetches = 0
    }

    private let state: Mutex<State>
    private let kidPrefix: String

    init(key: MockSigningKey, kidPrefix: String = "mock-") {
        state = Mutex(State(keys: [key], published: [key.kid]))
        self.kidPrefix = kidPrefix
    }

    /// A fresh key, published.
    convenience init(kidPrefix: String = "mock-") throws {
        self.init(key: try MockSigningKey.generate(kid: MockSigningKey.randomKid(prefix: kidPrefix)), kidPrefix: kidPrefix)
    }

    /// The key in `keyFile` (PEM; created when missing).
    convenience init(keyFile: URL, kid: String, kidPrefix: String = "mock-") throws {
        self.init(key: try MockSigningKey.load(keyFile, kid: kid), kidPrefix: kidPrefix)
    }

    var current: MockSigningKey { state.withLock { $0.keys[$0.keys.count - 1] } }

    func rotate(keepOld: Bool) throws -> String {
        let key = try MockSigningKey.generate(kid: MockSigningKey.randomKid(prefix: kidPrefix))
        state.withLock { state in
            state.keys.append(key)
            state.published = keepOld ? state.published + [key.kid] : [key.kid]
        }
        return key.kid
    }

    func rotateUnpublished() throws -> (kid: String, publish: @Sendable () -> Void) {
        let key = try MockSigningKey.generate(kid: MockSigningKey.randomKid(prefix: kidPrefix))
        state.withLock { $0.keys.append(key) }
        return (key.kid, { [self] in self.state.withLock { $0.published.append(key.kid) } })
    }

    func jwksJSON() throws -> Data {
        let keys = state.withLock { state in state.keys.filter { state.published.contains($0.kid) } }
        let document = ["keys": try keys.map { try $0.jwk() }]
        return try JSONSerialization.data(withJSONObject: document, options: [.sortedKeys])
    }

    var fault: MockKeysFault {
        get { state.withLock { $0.fault } }
        set { state.withLock { $0.fault = newValue } }
    }

    var fetches: Int { state.withLock { $0.fetches } }

    /// The key set endpoint's answer (counts the fetch).
    func keysAnswer() throws -> (status: Int, body: Data) {
        let served = try keysServed()
        return (served.status, served.body)
    }

    /// The key set endpoint's answer, and whether it is sent one byte a second (counts the fetch).
    func keysServed() throws -> (status: Int, body: Data, slow: Bool) {
        let fault = state.withLock { state in
            state.fetches += 1
            return state.fault
        }
        switch fault {
        case .none: return (200, try jwksJSON(), false)
        case .unavailable: return (503, Data(), false)
        case .emptySet: return (200, Data(#"{"keys":[]}"#.utf8), false)
        case .malformed: return (200, Data(#"<html>maintenance</html>"#.utf8), false)
        case .answer(let status, let body): return (status, body, false)
        case .slowBody: return (200, try jwksJSON(), true)
        }
    }

    /// Generated on first use: most mocks never mint with it.
    private func strangerKey() throws -> MockSigningKey {
        if let key = state.withLock({ $0.stranger }) { return key }
        let key = try MockSigningKey.generate(kid: "not-published")
        return state.withLock { state in
            if let existing = state.stranger { return existing }
            state.stranger = key
            return key
        }
    }

    /// A JWT with exactly these claims, RS256 with the current key unless `forgery` says otherwise.
    func mint(_ claims: [String: JWTHeaderField], header extraHeader: [String: JWTHeaderField], forgery: TokenForgery) throws
        -> String
    {
        let key = forgery == .unpublishedKey ? try strangerKey() : current
        var header: [String: JWTHeaderField] = ["alg": .string("RS256"), "kid": .string(key.kid), "typ": .string("JWT")]
        switch forgery {
        case .algNone: header["alg"] = .string("none")
        case .hs256WithPublicKey: header["alg"] = .string("HS256")
        default: break
        }
        header.merge(extraHeader) { $1 }
        return try Self.sign(rawHeader: Self.json(header), rawPayload: Self.json(claims), key: key, forgery: forgery)
    }

    /// From raw JSON texts, signed with the current key.
    func mint(rawHeader: Data, rawPayload: Data, forgery: TokenForgery) throws -> String {
        try Self.sign(rawHeader: rawHeader, rawPayload: rawPayload, key: current, forgery: forgery)
    }

    static func sign(rawHeader: Data, rawPayload: Data, key: MockSigningKey, forgery: TokenForgery) throws -> String {
        let signingInput = "\(base64URL(rawHeader)).\(base64URL(rawPayload))"
        let signature: Data
        switch forgery {
        case .valid, .unpublishedKey:
            signature = try key.sign(Data(signingInput.utf8))
        case .badSignature:
            var bytes = try key.sign(Data(signingInput.utf8))
            bytes[bytes.count / 2] ^= 0xFF
            signature = bytes
        case .algNone:
            signature = Data()
        case .hs256WithPublicKey:
            let secret = SymmetricKey(data: Data(key.privateKey.publicKey.pemRepresentation.utf8))
            signature = Data(HMAC<SHA256>.authenticationCode(for: Data(signingInput.utf8), using: secret))
        }
        return "\(signingInput).\(base64URL(signature))"
    }

    static func json(_ fields: [String: JWTHeaderField]) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(fields)
    }
}

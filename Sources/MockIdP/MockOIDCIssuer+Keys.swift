import Crypto
import Foundation
import JWTKit
import Synchronization
import _CryptoExtras

/// The signing keys of a ``MockOIDCIssuer``: RSA (RS256, PS256) and P-256 (ES256) keys held
/// at once, published or not, rotated on request.
extension MockOIDCIssuer {
    /// A JWS algorithm the issuer signs id tokens with.
    public enum Algorithm: String, Sendable, CaseIterable {
        /// RSASSA-PKCS1-v1_5 with SHA-256 (a 2048-bit RSA key).
        case rs256 = "RS256"
        /// RSASSA-PSS with SHA-256 (a 2048-bit RSA key).
        case ps256 = "PS256"
        /// ECDSA with P-256 and SHA-256.
        case es256 = "ES256"

        /// RS256 and PS256 share RSA keys; ES256 needs a P-256 key.
        var isRSA: Bool { self != .es256 }
    }

    /// Adds a new signing key for `algorithm`; new tokens of that algorithm use it. `keepOld`:
    /// keep publishing the earlier keys of that algorithm (providers publish several at once;
    /// false retires them from the key set, though tokens can still be minted with their kid).
    /// `publish` false: the key signs but is not in the key set until ``publish(kid:)``, so a
    /// token names a kid the verifier cannot find even after a refetch. Returns the new kid.
    @discardableResult
    public func rotate(_ algorithm: Algorithm = .rs256, keepOld: Bool = true, publish: Bool = true) throws -> String {
        let key = try MockOIDCKey.generate(algorithm, kid: MockOIDCKey.randomKid(issuer: name, algorithm))
        state.withLock { state in
            if !keepOld {
                let retired = Set(state.keys.filter { $0.algorithm == algorithm }.map(\.kid))
                state.published.removeAll { retired.contains($0) }
            }
            state.keys.append(key)
            if publish { state.published.append(key.kid) }
        }
        return key.kid
    }

    /// Publishes a held key (one rotated in with `publish: false`, or retired).
    public func publish(kid: String) {
        state.withLock { state in
            if state.keys.contains(where: { $0.kid == kid }), !state.published.contains(kid) { state.published.append(kid) }
        }
    }

    /// Removes a key from the key set; tokens can still be minted with it.
    public func unpublish(kid: String) {
        state.withLock { $0.published.removeAll { $0 == kid } }
    }

    /// The kid new tokens of `algorithm` are signed with (the newest key of that algorithm), or
    /// nil when the issuer holds no such key.
    public func currentKeyID(_ algorithm: Algorithm = .rs256) -> String? {
        state.withLock { $0.keys.last { $0.algorithm == algorithm }?.kid }
    }

    /// The kids in the key set, oldest first.
    public var publishedKeyIDs: [String] { state.withLock { $0.published } }

    /// The algorithms of the keys held, as discovery lists them (`id_token_signing_alg_values_supported`).
    public var algorithms: [Algorithm] {
        let held = state.withLock { Set($0.keys.map(\.algorithm)) }
        return Algorithm.allCases.filter { held.contains($0) }
    }

    /// The JWKS document the key set endpoint serves: every published key.
    public func jwksJSON() throws -> Data {
        let keys = state.withLock { state in state.keys.filter { state.published.contains($0.kid) } }
        return try JSONSerialization.data(withJSONObject: ["keys": try keys.map { try $0.jwk() }], options: [.sortedKeys])
    }

    /// The key a token is signed with: the one named `kid`, else the newest key of `algorithm`
    /// (default RS256, or the newest key's algorithm when the issuer holds no RSA key).
    func signingKey(kid: String?, algorithm: Algorithm?) throws -> (key: MockOIDCKey, algorithm: Algorithm) {
        let keys = state.withLock { $0.keys }
        if let kid {
            guard let key = keys.last(where: { $0.kid == kid }) else { throw MockOIDCError.unknownKeyID(kid) }
            let algorithm = algorithm ?? key.algorithm
            guard algorithm.isRSA == key.algorithm.isRSA else { throw MockOIDCError.keyCannotSign(kid: kid, algorithm.rawValue) }
            return (key, algorithm)
        }
        let wanted = algorithm ?? (keys.contains { $0.algorithm == .rs256 } ? .rs256 : keys.last?.algorithm ?? .rs256)
        guard let key = keys.last(where: { $0.algorithm == wanted }) else { throw MockOIDCError.noKey(wanted.rawValue) }
        return (key, wanted)
    }

    /// A key of `algorithm`'s kind that is never published (generated on first use).
    func strangerKey(_ algorithm: Algorithm) throws -> MockOIDCKey {
        let kind: Algorithm = algorithm.isRSA ? .rs256 : .es256
        if let key = state.withLock({ $0.strangers[kind] }) { return key }
        let key = try MockOIDCKey.generate(kind, kid: "not-published")
        return state.withLock { state in
            if let existing = state.strangers[kind] { return existing }
            state.strangers[kind] = key
            return key
        }
    }
}

/// Why a ``MockOIDCIssuer`` could not do what it was asked.
public enum MockOIDCError: Error, Sendable, Equatable {
    /// The issuer name is empty or holds characters other than letters, digits, `-`, `_`, `.`.
    case invalidName(String)
    /// No key of this algorithm is held (``MockOIDCIssuer/rotate(_:keepOld:publish:)`` adds one).
    case noKey(String)
    /// No key with this kid is held.
    case unknownKeyID(String)
    /// The key cannot sign with this algorithm (an EC key for RS256, an RSA key for ES256).
    case keyCannotSign(kid: String, String)
}

/// One signing key of a ``MockOIDCIssuer`` and its public JWK.
struct MockOIDCKey: Sendable {
    enum Material: Sendable {
        case rsa(_RSA.Signing.PrivateKey)
        case p256(P256.Signing.PrivateKey)
    }

    let kid: String
    /// The algorithm the JWK names (an RSA key may also sign with the other RSA algorithm).
    let algorithm: MockOIDCIssuer.Algorithm
    let material: Material

    static func generate(_ algorithm: MockOIDCIssuer.Algorithm, kid: String) throws -> MockOIDCKey {
        let material: Material =
            algorithm.isRSA ? .rsa(try _RSA.Signing.PrivateKey(keySize: .bits2048)) : .p256(P256.Signing.PrivateKey())
        return MockOIDCKey(kid: kid, algorithm: algorithm, material: material)
    }

    static func randomKid(issuer: String, _ algorithm: MockOIDCIssuer.Algorithm) -> String {
        MockSigningKey.randomKid(prefix: "\(issuer)-\(algorithm.rawValue.lowercased())-")
    }

    /// The RSA key in `file` (PEM; created when missing, like the other mocks' key files) as an
    /// RS256 key whose kid is ``fileKeyID(_:)``: a `mock-idp serve` and a `mock-idp mint`
    /// started separately name and sign with the same key, whatever the issuer's name.
    static func load(_ file: URL) throws -> MockOIDCKey {
        let key = try MockSigningKey.load(file, kid: "").privateKey
        return MockOIDCKey(kid: try fileKeyID(key.publicKey), algorithm: .rs256, material: .rsa(key))
    }

    /// `mock-oidc-` and the key's JWK thumbprint (RFC 7638: base64url SHA-256 of
    /// `{"e":…,"kty":"RSA","n":…}`), so the kid follows from the key alone.
    static func fileKeyID(_ key: _RSA.Signing.PublicKey) throws -> String {
        let primitives = try key.getKeyPrimitives()
        let members = #"{"e":"\#(base64URL(primitives.publicExponent))","kty":"RSA","n":"\#(base64URL(primitives.modulus))"}"#
        return "mock-oidc-" + base64URL(Data(SHA256.hash(data: Data(members.utf8))))
    }

    /// The public half as a JWK (`use` sig, `alg` the key's algorithm).
    func jwk() throws -> [String: String] {
        switch material {
        case .rsa(let key):
            let primitives = try key.publicKey.getKeyPrimitives()
            return [
                "kty": "RSA", "kid": kid, "use": "sig", "alg": algorithm.rawValue,
                "n": base64URL(primitives.modulus), "e": base64URL(primitives.publicExponent),
            ]
        case .p256(let key):
            let point = key.publicKey.rawRepresentation
            return [
                "kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "alg": algorithm.rawValue,
                "x": base64URL(point.prefix(32)), "y": base64URL(point.suffix(32)),
            ]
        }
    }

    /// The JWS signature of `input` with `algorithm` (which must suit the key).
    func sign(_ input: Data, algorithm: MockOIDCIssuer.Algorithm) throws -> Data {
        switch (material, algorithm) {
        case (.rsa(let key), .rs256): return try key.signature(for: input, padding: .insecurePKCS1v1_5).rawRepresentation
        case (.rsa(let key), .ps256): return try key.signature(for: input, padding: .PSS).rawRepresentation
        // JWS ES256 signatures are r ‖ s, 32 bytes each (RFC 7518 §3.4), not DER.
        case (.p256(let key), .es256): return try key.signature(for: input).rawRepresentation
        default: throw MockOIDCError.keyCannotSign(kid: kid, algorithm.rawValue)
        }
    }

    /// The public key in PEM (the HS256 confusion attack keys HMAC with it).
    var publicKeyPEM: String {
        switch material {
        case .rsa(let key): key.publicKey.pemRepresentation
        case .p256(let key): key.publicKey.pemRepresentation
        }
    }
}

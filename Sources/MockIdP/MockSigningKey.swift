import Crypto
import Foundation
import JWTKit
import _CryptoExtras

/// An RSA key the mock signs identity tokens with (RS256), and its public JWK.
struct MockSigningKey: Sendable {
    let kid: String
    let privateKey: _RSA.Signing.PrivateKey

    static func generate(kid: String = randomKid(prefix: "mock-")) throws -> MockSigningKey {
        MockSigningKey(kid: kid, privateKey: try _RSA.Signing.PrivateKey(keySize: .bits2048))
    }

    static func randomKid(prefix: String) -> String { prefix + UUID().uuidString.prefix(8).lowercased() }

    /// The key in `file` (PEM), or a new key written there when the file is missing.
    static func load(_ file: URL, kid: String) throws -> MockSigningKey {
        if let pem = try? String(contentsOf: file, encoding: .utf8) {
            return MockSigningKey(kid: kid, privateKey: try _RSA.Signing.PrivateKey(pemRepresentation: pem))
        }
        let key = try generate(kid: kid)
        try key.privateKey.pemRepresentation.write(to: file, atomically: true, encoding: .utf8)
        return key
    }

    /// The public half as a JWK (kty RSA, alg RS256, use sig).
    func jwk() throws -> [String: String] {
        let primitives = try privateKey.publicKey.getKeyPrimitives()
        return [
            "kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
            "n": base64URL(primitives.modulus), "e": base64URL(primitives.publicExponent),
        ]
    }

    func sign(_ input: Data) throws -> Data {
        try privateKey.signature(for: input, padding: .insecurePKCS1v1_5).rawRepresentation
    }
}

/// `count` random bytes, base64url without padding.
func randomBase64URL(_ count: Int) -> String {
    var generator = SystemRandomNumberGenerator()
    return base64URL(Data((0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }))
}

func base64URL(_ data: Data) -> String {
    data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

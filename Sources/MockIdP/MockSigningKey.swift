import Crypto
import Foundation
import JWTKit
import _CryptoExtras

/// An RSA key the mock signs identity tokens with (RS256), and its public JWK.
struct MockSigningKey: Sendable {
    let kid: String
    let privateKey: _RSA.Signing.PrivateKey

    static func generate(kid: String = "mock-" + UUID().uuidString.prefix(8).lowercased()) throws -> MockSigningKey {
        MockSigningKey(kid: kid, privateKey: try _RSA.Signing.PrivateKey(keySize: .bits2048))
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

func base64URL(_ data: Data) -> String {
    data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

import Foundation
import JWTKit

/// A Google-shaped identity provider for tests, the demo and benchmarks: a JWKS (served at
/// ``jwksPath``), key rotation, and id tokens with any claims (also wrong ones). Serve it with
/// ``MockIdPServer``; never point a production broker at it.
public final class MockGoogleIdP: MockTokenIssuer {
    public static let issuer = "https://accounts.google.com"
    /// The other `iss` form Google writes (and verifiers must accept).
    public static let shortIssuer = "accounts.google.com"
    /// Where ``MockIdPServer`` serves the key set (Google's is /oauth2/v3/certs).
    public static let jwksPath = "/google/oauth2/v3/certs"

    /// `BROKER_GOOGLE_JWKS_URL` for a mock served at `base` (e.g. `http://127.0.0.1:9100`).
    public static func jwksURL(base: String) -> String { trimmedBase(base) + jwksPath }

    /// Signing keys, the published set, key set faults.
    public let keys: MockKeyRing

    public init() throws {
        keys = try MockKeyRing(kidPrefix: "google-")
    }

    /// A mock whose signing key lives in `keyFile` (PEM; created when missing), so a
    /// `mock-idp serve` and a `mock-idp mint` started separately sign with the same key.
    public init(keyFile: URL) throws {
        keys = try MockKeyRing(keyFile: keyFile, kid: "mock-google-file", kidPrefix: "google-")
    }

    /// Claims shaped like a Google id token. `authorizedParty` (`azp`) defaults to the audience,
    /// as in web sign-in; remove the member from the result for a token without one. `name`
    /// also gives `given_name` (its first word) and `family_name` (the rest, when any).
    public func claims(
        subject: String, audience: String, authorizedParty: String? = nil, nonce: String? = nil, email: String? = nil,
        emailVerified: Bool = true, hostedDomain: String? = nil, name: String? = nil, issuer: String = MockGoogleIdP.issuer,
        issuedAt: Date = Date(), lifetime: TimeInterval = 3600, extra: [String: JWTHeaderField] = [:]
    ) -> [String: JWTHeaderField] {
        let iat = Int(issuedAt.timeIntervalSince1970)
        var claims: [String: JWTHeaderField] = [
            "iss": .string(issuer), "azp": .string(authorizedParty ?? audience), "aud": .string(audience),
            "sub": .string(subject), "iat": .int(iat), "exp": .int(iat + Int(lifetime)),
            // Google's id tokens have no jti; a random at_hash makes two tokens minted for one
            // person in one second differ, as real ones do.
            "at_hash": .string(randomBase64URL(16)),
        ]
        if let email {
            claims["email"] = .string(email)
            claims["email_verified"] = .bool(emailVerified)
        }
        if let hostedDomain { claims["hd"] = .string(hostedDomain) }
        if let nonce { claims["nonce"] = .string(nonce) }
        if let name { claims.merge(nameClaims(name)) { $1 } }
        return claims.merging(extra) { $1 }
    }
}

/// `name`, `given_name` (the first word) and `family_name` (the rest, when any).
func nameClaims(_ name: String) -> [String: JWTHeaderField] {
    var claims: [String: JWTHeaderField] = ["name": .string(name)]
    let parts = name.split(separator: " ", maxSplits: 1)
    if let given = parts.first { claims["given_name"] = .string(String(given)) }
    if parts.count == 2 { claims["family_name"] = .string(String(parts[1])) }
    return claims
}

func trimmedBase(_ base: String) -> String {
    var base = base
    while base.hasSuffix("/") { base.removeLast() }
    return base
}

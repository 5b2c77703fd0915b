import Foundation
import JWTKit
import Synchronization

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
    /// The web flow's clients, codes, consenting person and faults.
    public let web = MockCodeFlow()

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

/// Google's web flow, as the mock serves it: a discovery document naming Google's issuer with
/// the mock's authorize and token endpoints (``MockCodeFlow``), and id tokens shaped like
/// Google's from the token endpoint.
extension MockGoogleIdP {
    /// `BROKER_GOOGLE_DISCOVERY_URL` for a mock served at `base`.
    public static func discoveryURL(base: String) -> String { trimmedBase(base) + discoveryPath }
    static let discoveryPath = "/google/.well-known/openid-configuration"
    static let authorizePath = "/google/o/oauth2/v2/auth"
    static let tokenPath = "/google/token"

    /// Registers a client of the web flow with its secret.
    public func registerWebClient(_ clientID: String, secret: String) {
        web.state.withLock { $0.clients[clientID] = secret }
    }

    func discoveryDocument(base: String) throws -> Data {
        let base = trimmedBase(base)
        return try JSONSerialization.data(
            withJSONObject: [
                "issuer": Self.issuer, "authorization_endpoint": base + Self.authorizePath, "token_endpoint": base + Self.tokenPath,
                "jwks_uri": base + Self.jwksPath, "id_token_signing_alg_values_supported": ["RS256"],
                "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic"],
            ], options: [.sortedKeys, .withoutEscapingSlashes])
    }

    /// The token endpoint's status and body.
    func tokenAnswer(form: [String: String], authorization: String?, now: Date = Date()) throws -> (status: Int, body: Data) {
        switch web.redeem(form: form, authorization: authorization, now: now) {
        case .failure(let error): return (error.status, error.body)
        case .success(let redeemed):
            let idToken = try mint(
                claims(
                    subject: redeemed.user.subject, audience: redeemed.clientID, nonce: redeemed.nonce, email: redeemed.user.email,
                    name: redeemed.user.name, issuedAt: now))
            return (200, MockCodeFlow.tokenBody(idToken: idToken))
        }
    }
}

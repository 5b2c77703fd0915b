import Foundation
import JWTKit
import Synchronization

/// A Facebook-shaped identity provider for tests, the demo and benchmarks. Limited Login: a
/// JWKS (served at ``jwksPath``), key rotation, and id tokens with any claims (also wrong ones).
/// Classic Facebook Login: registered apps, user access tokens, and Graph's `debug_token` and
/// `/me` (served under ``graphPath``; see MockFacebookIdP+Graph.swift). Serve it with
/// ``MockIdPServer``; never point a production broker at it.
public final class MockFacebookIdP: MockTokenIssuer {
    /// The `iss` of Limited Login tokens.
    public static let issuer = "https://www.facebook.com"
    /// Where ``MockIdPServer`` serves Limited Login's key set.
    public static let jwksPath = "/facebook/.well-known/oauth/openid/jwks/"
    /// Where ``MockIdPServer`` serves the Graph API (`/debug_token`, `/me`; also under a version
    /// segment such as `/v24.0`).
    public static let graphPath = "/facebook/graph"
    /// Admin route of the served mock: `POST` `{"app_id", "user_id"?, "name"?, "email"?,
    /// "expires_in"?}` answers `{"access_token", "user_id", "app_id", "expires_at"}`.
    public static let testUsersPath = "/facebook/test-users"

    /// `BROKER_FACEBOOK_JWKS_URL` for a mock served at `base` (e.g. `http://127.0.0.1:9100`).
    public static func jwksURL(base: String) -> String { trimmedBase(base) + jwksPath }
    /// `BROKER_FACEBOOK_GRAPH_URL` for a mock served at `base`.
    public static func graphURL(base: String) -> String { trimmedBase(base) + graphPath }
    /// The test-users admin route of a mock served at `base`.
    public static func testUsersURL(base: String) -> String { trimmedBase(base) + testUsersPath }

    /// Limited Login signing keys, the published set, key set faults.
    public let keys: MockKeyRing
    /// Apps, user access tokens, Graph faults and what Graph received.
    let graph = Mutex(GraphState())

    public init() throws {
        keys = try MockKeyRing(kidPrefix: "facebook-")
    }

    /// A mock whose Limited Login key lives in `keyFile` (PEM; created when missing), so a
    /// `mock-idp serve` and a `mock-idp mint` started separately sign with the same key.
    /// (Apps and access tokens live only in the process that registered or issued them.)
    public init(keyFile: URL) throws {
        keys = try MockKeyRing(keyFile: keyFile, kid: "mock-facebook-file", kidPrefix: "facebook-")
    }

    /// Claims shaped like a Limited Login id token: `sub` the app-scoped user id, `aud` the app
    /// id, the raw nonce, a random `jti`. `name` also gives `given_name` (its first word) and
    /// `family_name` (the rest, when any).
    public func claims(
        subject: String, appID: String, nonce: String? = nil, email: String? = nil, name: String? = nil,
        picture: String? = nil, issuedAt: Date = Date(), lifetime: TimeInterval = 3600,
        extra: [String: JWTHeaderField] = [:]
    ) -> [String: JWTHeaderField] {
        let iat = Int(issuedAt.timeIntervalSince1970)
        var claims: [String: JWTHeaderField] = [
            "iss": .string(Self.issuer), "aud": .string(appID), "sub": .string(subject), "iat": .int(iat),
            "exp": .int(iat + Int(lifetime)), "jti": .string(UUID().uuidString.lowercased()),
        ]
        if let nonce { claims["nonce"] = .string(nonce) }
        if let email { claims["email"] = .string(email) }
        if let name { claims.merge(nameClaims(name)) { $1 } }
        if let picture { claims["picture"] = .string(picture) }
        return claims.merging(extra) { $1 }
    }
}

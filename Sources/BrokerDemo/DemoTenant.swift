import BrokerApplication
import BrokerCore
import BrokerServer
import Crypto
import Foundation
import Hummingbird
import MockIdP
import Storage

/// The demo's tenant and its providers, wired to MockIdP (`broker demo` only: `broker serve`
/// never trusts the mock). Lives apart from the server so that the production server does not
/// depend on MockIdP.
public enum DemoTenant {
    public static let slug = "demo"
    public static let appleClientID = "com.example.demo"
    public static let teamID = "DEMO000001"
    public static let keyID = "DEMOKEY001"
    public static let googleClientID = "demo-web.apps.googleusercontent.com"
    public static let facebookAppID = "1000000000001"

    /// The mocks of one demo run, playing Apple, Google and Facebook.
    public struct Mocks: Sendable {
        public let apple: MockAppleIdP
        public let google: MockGoogleIdP
        public let facebook: MockFacebookIdP
        /// Facebook's app secret for this run (random; the tenant's sealed copy matches it).
        public let facebookAppSecret: String

        public init() throws {
            apple = try MockAppleIdP()
            google = try MockGoogleIdP()
            facebook = try MockFacebookIdP()
            facebookAppSecret = Hex.encode(SecureRandom.bytes(16))
            facebook.registerApp(appID: DemoTenant.facebookAppID, secret: facebookAppSecret)
        }

        /// Serves the three mocks on 127.0.0.1:`port` (0: a free port, told to `onRunning`) until
        /// the service group it runs in shuts down gracefully (or its task is cancelled).
        public func serve(port: Int, onRunning: @escaping @Sendable (Int) async -> Void) async throws {
            try await MockIdPServer.application(apple: apple, google: google, facebook: facebook, port: port, onRunning: onRunning)
                .run()
        }
    }

    /// Every provider's URL on the mock at `base`.
    public static func environment(mockBaseURL base: String) -> [String: String] {
        [
            "BROKER_APPLE_BASE_URL": base, "BROKER_GOOGLE_JWKS_URL": MockGoogleIdP.jwksURL(base: base),
            "BROKER_FACEBOOK_JWKS_URL": MockFacebookIdP.jwksURL(base: base),
            "BROKER_FACEBOOK_GRAPH_URL": MockFacebookIdP.graphURL(base: base),
        ]
    }

    /// Creates (or updates) the demo tenant: Apple (team, group), Google, Facebook with Limited
    /// Login; returns a fresh API key.
    public static func prepare(database: Database, secrets: SecretBox, mocks: Mocks, actor: String) async throws -> String {
        let tenants = TenantAdmin(database: database, actor: actor)
        if try await database.tenants.find(slug: slug) == nil {
            _ = try await tenants.create(slug: slug, name: "Demo tenant", secrets: secrets)
        }
        // A new team key each start, registered with this run's mock, so code exchange works too.
        let p8 = P256.Signing.PrivateKey()
        mocks.apple.registerTeam(teamID, keyID: keyID, publicKey: p8.publicKey)
        let appleAdmin = AppleAdmin(database: database, actor: actor)
        _ = try await appleAdmin.setTeam(tenant: slug, teamID: teamID, keyID: keyID, p8PEM: p8.pemRepresentation, secrets: secrets)
        let setup = try await appleAdmin.show(tenant: slug)
        if !setup.groups.contains(where: { $0.primaryAppID == appleClientID }) {
            _ = try await appleAdmin.addGroup(tenant: slug, primaryAppID: appleClientID)
        }
        let providers = ProviderAdmin(database: database, actor: actor)
        _ = try await providers.enableGoogle(
            tenant: slug, clientIDs: [googleClientID], hostedDomain: nil, platforms: [.ios, .android, .web])
        _ = try await providers.enableFacebook(
            tenant: slug, appID: facebookAppID, appSecret: mocks.facebookAppSecret, limitedLogin: true,
            platforms: [.ios, .android, .web], secrets: secrets)
        let (_, key) = try await APIKeyAdmin(database: database, actor: actor).create(
            tenant: slug, name: "demo-\(Int(Date().timeIntervalSince1970))", scopes: [])
        return key
    }

    /// The banner with a working curl per provider: fresh tokens from this run's mocks.
    public static func banner(publicURL: String, apiKey: String, mocks: Mocks, mockBaseURL: String) throws -> String {
        // The app's nonce: Apple gets its SHA-256 (in the token), the backend posts the raw value.
        let appleNonce = Base64URL.encode(SecureRandom.bytes(16))
        let appleToken = try mocks.apple.mint(
            mocks.apple.claims(
                subject: "001234.demo.user", audience: appleClientID, nonce: Hex.encode(SHA256.hash(data: Data(appleNonce.utf8))),
                email: "demo.user@example.com", lifetime: 86_400))
        let googleNonce = Base64URL.encode(SecureRandom.bytes(16))
        let googleToken = try mocks.google.mint(
            mocks.google.claims(
                subject: "100000000000000000001", audience: googleClientID, nonce: googleNonce, email: "demo.user@gmail.com",
                name: "Demo User", lifetime: 86_400))
        let facebookToken = mocks.facebook.issueAccessToken(
            appID: facebookAppID, userID: "10000000000001", name: "Demo User", email: "demo.user@example.com")
        let limitedNonce = Base64URL.encode(SecureRandom.bytes(16))
        let limitedToken = try mocks.facebook.mint(
            mocks.facebook.claims(
                subject: "10000000000001", appID: facebookAppID, nonce: limitedNonce, email: "demo.user@example.com",
                name: "Demo User", lifetime: 86_400))
        func curl(_ provider: String, _ body: String) -> String {
            """
            curl -s -X POST \(publicURL)/v1/sign-in/\(provider) \\
              -H 'Authorization: Bearer \(apiKey)' -H 'Content-Type: application/json' \\
              -d '\(body)'
            """
        }
        return """

            IdentityBroker demo: tenant '\(slug)'; MockIdP plays Apple, Google and Facebook at \(mockBaseURL).
            API key (new on every start): \(apiKey)

            Sign in with Apple (client \(appleClientID)):

            \(curl("apple", #"{"client_id":"\#(appleClientID)","identity_token":"\#(appleToken)","nonce":"\#(appleNonce)","user":{"name":{"firstName":"Demo","lastName":"User"}}}"#))

            Sign in with Google (client \(googleClientID)):

            \(curl("google", #"{"id_token":"\#(googleToken)","nonce":"\#(googleNonce)"}"#))

            Sign in with Facebook, classic access token (app \(facebookAppID); checked at the mock's Graph on every use):

            \(curl("facebook", #"{"access_token":"\#(facebookToken)"}"#))

            Sign in with Facebook Limited Login (the same person as the classic token: the same account):

            \(curl("facebook", #"{"limited_login_token":"\#(limitedToken)","nonce":"\#(limitedNonce)"}"#))

            An identity token signs in once: pasting it again answers token_replayed (restart the demo for another).
            Apple and Google are two accounts for one person until linking.

            Then: verify the access token with \(publicURL)/t/\(slug)/.well-known/jwks.json, refresh it with
            POST /v1/sessions/refresh, inspect it with POST /v1/sessions/introspect. Ctrl-C stops everything.

            """
    }
}

import BrokerCore
import BrokerApplication
import BrokerServer
import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import MockIdP
import NIOCore
import PostgresNIO
import Providers
import Storage
import TestSupport

/// Tenant `acme` with Google (web and iOS client ids) and Facebook (app 1234567890, Limited
/// Login on) enabled, against MockIdP on loopback; tenant `bravo` with its own Google client
/// and no Facebook; tenant `plain` with neither. Without Apple, acme and bravo are in
/// violation of guideline 4.8 (forced, on purpose).
struct ProviderTestSetup {
    static let webClient = "1111-web.apps.googleusercontent.com"
    static let iosClient = "1111-ios.apps.googleusercontent.com"
    static let bravoClient = "2222-web.apps.googleusercontent.com"
    static let appID = "1234567890"
    static let appSecret = "0123456789abcdef0123456789abcdef"
    static let otherAppID = "9999999999"

    let app: TestApp
    let client: any TestClientProtocol
    let mocks: MockProvidersServer.Mocks
    let keys: [String: String]
    let tenant: Tenant

    var google: MockGoogleIdP { mocks.google }
    var facebook: MockFacebookIdP { mocks.facebook }

    /// `graphTimeoutSeconds`: `BROKER_PROVIDER_TIMEOUT`; `appleBaseURL`: Apple's, instead of the mock's.
    static func run(
        graphTimeoutSeconds: Int = 10, hostedDomain: String? = nil, limitedLogin: Bool = true, appleBaseURL: String? = nil,
        _ test: @Sendable @escaping (ProviderTestSetup) async throws -> Void
    ) async throws {
        try await MockProvidersServer.with { mocks in
            mocks.facebook.registerApp(appID: appID, secret: appSecret)
            mocks.facebook.registerApp(appID: otherAppID, secret: "other-app-secret")
            let endpoints = ProviderEndpoints(
                appleBaseURL: appleBaseURL ?? mocks.baseURL, googleKeysURL: MockGoogleIdP.jwksURL(base: mocks.baseURL),
                facebookGraphURL: MockFacebookIdP.graphURL(base: mocks.baseURL),
                facebookKeysURL: MockFacebookIdP.jwksURL(base: mocks.baseURL), timeoutSeconds: graphTimeoutSeconds,
                googleDiscoveryURL: MockGoogleIdP.discoveryURL(base: mocks.baseURL), publicURL: TestApp.publicURL)
            try await TestApp.run(endpoints: endpoints) { app, client in
                var keys: [String: String] = [:]
                var acme: Tenant?
                for slug in ["acme", "bravo", "plain"] {
                    let tenant = try await app.createTenant(slug)
                    if slug == "acme" { acme = tenant }
                    keys[slug] = try await app.createKey(slug)
                }
                let admin = ProviderAdmin(database: app.database, actor: "test")
                // Google and Facebook on iOS without Sign in with Apple break guideline 4.8: these
                // tenants are set up that way on purpose (forced) to test the providers alone.
                _ = try await admin.enableGoogle(
                    tenant: "acme", clientIDs: [webClient, iosClient], hostedDomain: hostedDomain, platforms: [.ios, .web], force: true)
                _ = try await admin.enableFacebook(
                    tenant: "acme", appID: appID, appSecret: appSecret, limitedLogin: limitedLogin, platforms: [.ios, .android],
                    secrets: app.secrets, force: true)
                _ = try await admin.enableGoogle(
                    tenant: "bravo", clientIDs: [bravoClient], hostedDomain: nil, platforms: [], force: true)
                guard let acme else { return }
                try await test(ProviderTestSetup(app: app, client: client, mocks: mocks, keys: keys, tenant: acme))
            }
        }
    }

    /// A Google id token for `subject`, issued to the web client unless told otherwise.
    func googleToken(
        subject: String, audience: String = webClient, authorizedParty: String? = nil, nonce: String? = nil,
        email: String? = "person@gmail.com", hostedDomain: String? = nil, issuer: String = MockGoogleIdP.issuer,
        extra: [String: JWTHeaderField] = [:]
    ) throws -> String {
        try google.mint(
            google.claims(
                subject: subject, audience: audience, authorizedParty: authorizedParty, nonce: nonce, email: email,
                hostedDomain: hostedDomain, name: "Grace Hopper", issuer: issuer, extra: extra))
    }

    @discardableResult
    func post(_ path: String, json: [String: Any], tenant: String = "acme") async throws -> TestResponse {
        let body = try JSONSerialization.data(withJSONObject: json)
        return try await client.execute(
            uri: path, method: .post,
            headers: [.authorization: "Bearer \(keys[tenant] ?? "")", .contentType: "application/json"],
            body: ByteBuffer(bytes: body))
    }

    func count(_ table: String) async throws -> Int {
        let rows = try await app.database.client.query(PostgresQuery(unsafeSQL: "SELECT count(*)::int8 FROM \(table)"))
        var count = 0
        for try await value in rows.decode(Int.self) { count = value }
        return count
    }
}

extension ProviderTestSetup {
    /// A Sign in with Apple key for tests that add Apple to the tenant.
    static var p8PEM: String { P256.Signing.PrivateKey().pemRepresentation }
}

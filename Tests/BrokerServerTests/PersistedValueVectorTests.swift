import BrokerCore
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
import Testing

@testable import BrokerApplication
@testable import BrokerServer

/// Known-answer vectors for the stored values the server composes (see BrokerCoreTests' and
/// ProvidersTests' PersistedValueVectorTests for the functions beneath): fixed inputs, the
/// expected values written out, computed once from the code as released. Databases hold these
/// values: a vector that fails means a change would strand them.
@Suite struct PersistedValueVectorTests {
    static let tenantID = UUID(uuidString: "0b5e1a7c-3d2f-4e6a-9b8c-1d2e3f405162")

    /// The key the server derives refresh-token successors under (decision 0017), from the
    /// test master key 00 01 … 1f. Every `sessions.refresh_token_hash` written by a rotation is
    /// the hash of a token derived under it; a retry must derive the same successor.
    @Test func theServerDerivesSuccessorsUnderItsPurposeKey() async throws {
        try await TestApp.run { app, _ in
            let key = app.services.refreshSuccessorKey.withUnsafeBytes { Hex.encode($0) }
            #expect(key == "a6150eb436ebb1d25d276c7c1bfa8f54483801cba6c65c8d470d64bf3f43617a")
        }
    }

    /// A Google sign-in with a `jti` opens the session its replay key names (decisions 0018 and
    /// 0023): `sessions.id` is the first 128 bits of SHA-256 over the tenant, the provider id
    /// `google`, the issuer and the `jti`. The same token is refused again by that primary key.
    /// And what the tenant's admin paths seal opens under the contexts written out here:
    /// `signing_keys.private_key_sealed`, `apple_teams.private_key_sealed`,
    /// `provider_configs.secret_sealed`.
    @Test func aSignInOpensTheSessionItsReplayKeyNamesAndSecretsAreSealedUnderTheirContexts() async throws {
        let tenantID = try #require(Self.tenantID)
        let webClient = "1111-web.apps.googleusercontent.com"
        try await MockProvidersServer.with { mocks in
            let endpoints = ProviderEndpoints(
                appleBaseURL: mocks.baseURL, googleKeysURL: MockGoogleIdP.jwksURL(base: mocks.baseURL),
                facebookGraphURL: MockFacebookIdP.graphURL(base: mocks.baseURL),
                facebookKeysURL: MockFacebookIdP.jwksURL(base: mocks.baseURL))
            try await TestApp.run(endpoints: endpoints) { app, client in
                let now = Date()
                let tenant = Tenant(
                    id: tenantID, slug: try TenantSlug("acme"), displayName: "acme", status: .active, session: .default,
                    linking: .default, keyActivationDelay: 600, createdAt: now, updatedAt: now)
                let signingKey = try SigningKeyAdmin.makeKey(tenantID: tenantID, activatesAt: now, secrets: app.secrets, now: now)
                _ = try await app.database.tenants.create(tenant, firstKey: signingKey, actor: "test")
                let apiKey = try await app.createKey("acme")
                let admin = ProviderAdmin(database: app.database, actor: "test")
                _ = try await admin.enableGoogle(tenant: "acme", clientIDs: [webClient], hostedDomain: nil, platforms: [.web], force: true)
                _ = try await admin.enableFacebook(
                    tenant: "acme", appID: "1234567890", appSecret: "0123456789abcdef0123456789abcdef", limitedLogin: false,
                    platforms: [.android], secrets: app.secrets, force: true)
                _ = try await AppleAdmin(database: app.database, actor: "test").setTeam(
                    tenant: "acme", teamID: "TEAM000001", keyID: "KEY0000001", p8PEM: ProviderTestSetup.p8PEM, secrets: app.secrets)

                let token = try mocks.google.mint(
                    mocks.google.claims(
                        subject: "g-0001", audience: webClient, email: nil, extra: ["jti": .string("f3a1c9e0b7d24c68a5e1")]))
                let response = try await client.execute(
                    uri: "/v1/sign-in/google", method: .post,
                    headers: [.authorization: "Bearer \(apiKey)", .contentType: "application/json"],
                    body: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: ["id_token": token])))
                #expect(response.status == .ok, "\(String(buffer: response.body))")
                let access = try #require(try response.json()[path: "session.access_token"] as? String)
                // sessions.id
                #expect(try jwtClaims(access)["sid"] as? String == "d7946d19-57bf-15e0-9e28-20a7c5d629d6")
                let sessions = try await Self.column(app, "SELECT id FROM sessions", as: UUID.self)
                #expect(sessions == [UUID(uuidString: "d7946d19-57bf-15e0-9e28-20a7c5d629d6")])

                let box = app.secrets
                let sealedKeys = try await Self.column(app, "SELECT private_key_sealed FROM signing_keys", as: Data.self)
                #expect(sealedKeys.count == 1)
                for sealed in sealedKeys {
                    // signing_keys.private_key_sealed
                    let opened = try box.open(
                        sealed, context: "signing_key:0b5e1a7c-3d2f-4e6a-9b8c-1d2e3f405162:\(signingKey.kid)", what: "signing key")
                    #expect(opened.count == 32)
                }
                let sealedSecrets = try await Self.column(
                    app, "SELECT secret_sealed FROM provider_configs WHERE secret_sealed IS NOT NULL", as: Data.self)
                #expect(sealedSecrets.count == 1)
                for sealed in sealedSecrets {
                    // provider_configs.secret_sealed
                    let opened = try box.open(
                        sealed, context: "provider_secret:0b5e1a7c-3d2f-4e6a-9b8c-1d2e3f405162:facebook:1234567890", what: "app secret")
                    #expect(String(decoding: opened, as: UTF8.self) == "0123456789abcdef0123456789abcdef")
                }
                let sealedP8s = try await Self.column(app, "SELECT private_key_sealed FROM apple_teams", as: Data.self)
                #expect(sealedP8s.count == 1)
                for sealed in sealedP8s {
                    // apple_teams.private_key_sealed
                    let opened = try box.open(sealed, context: "apple_p8:0b5e1a7c-3d2f-4e6a-9b8c-1d2e3f405162:TEAM000001", what: ".p8")
                    #expect(String(decoding: opened, as: UTF8.self).hasPrefix("-----BEGIN PRIVATE KEY-----"))
                }
            }
        }
    }

    static func column<T: PostgresDecodable & Sendable>(_ app: TestApp, _ sql: String, as type: T.Type) async throws -> [T] {
        let rows = try await app.database.client.query(PostgresQuery(unsafeSQL: sql), logger: TestDatabase.logger)
        var values: [T] = []
        for try await value in rows.decode(T.self) { values.append(value) }
        return values
    }
}

import BrokerCore
import BrokerApplication
import BrokerServer
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JWTKit
import MockIdP
import NIOCore
import PostgresNIO
import Providers
import Storage
import TestSupport
import Testing

/// An upgrade from the previous release with people signed in: a database migrated up to the
/// previous release's last migration holds a tenant as that release wrote it (rows written
/// with plain SQL against that schema, see ``seedPreviousReleaseData(_:appleKey:)``); the
/// remaining migrations run; the current server then serves it. Every identity, session,
/// refresh token, provider setting and attestation must keep working.
@Suite struct PreviousReleaseMigrationTests {
    /// The last migration of the previous release.
    static let previousRelease = 12

    // MARK: What the previous release stored (fixed values)

    enum Seed {
        static let tenantID = UUID(uuidString: "0b5e1a7c-3d2f-4e6a-9b8c-1d2e3f405162") ?? UUID()
        static let slug = "acme"
        static let apiKey = "ibk_Q2xvdWRz_S2VlcEJsdWVTa2llc0FuZFdhcm1TdW5zaGk"
        static let teamID = "TEAM000001"
        static let keyID = "KEY0000001"
        static let appleClient = "com.acme.app"
        static let googleWebClient = "1111-web.apps.googleusercontent.com"
        static let googleIOSClient = "1111-ios.apps.googleusercontent.com"
        static let googleHostedDomain = "acme.example"
        static let facebookAppID = "1234567890"
        static let facebookAppSecret = "0123456789abcdef0123456789abcdef"

        /// Apple and Google identities.
        static let firstAccount = UUID(uuidString: "018bcfe5-0000-7000-8000-000000000a01") ?? UUID()
        /// The Facebook identity.
        static let secondAccount = UUID(uuidString: "018bcfe5-0000-7000-8000-000000000a02") ?? UUID()
        static let appleSubject = "001234.0a1b2c3d4e5f.0123"
        static let googleSubject = "g-0001"
        static let facebookUser = "10001"
        static let appleRefreshToken = "r1d2e3f4.0.sxyz.AbCdEfGhIjKlMnOpQrStUv"

        /// A session opened by Apple, whose refresh token names it (decision 0027); its token and
        /// that token's successor are the vectors of BrokerCoreTests/PersistedValueVectorTests.
        static let appleSession = UUID(uuidString: "018bcfe5-6800-7a3c-9d41-2b6f00c1e7a5") ?? UUID()
        static let appleSessionToken = "ibr_AYvP5WgAejydQStvAMHnpQMKERgfJi00O0JJUFdeZWxzeoGIj5adpKuyucDHztXc"
        static let appleSessionSuccessor = "ibr_AYvP5WgAejydQStvAMHnpbkmM7zOiyKq0mjqoEpLfW24sDPwn5Wl_yQa5qZ9APYm"
        /// A session opened by Google before tokens named their session (legacy token, found by hash).
        static let googleSession = UUID(uuidString: "018bcfe5-0000-7000-8000-000000000b02") ?? UUID()
        static let googleSessionToken = "ibr_BRAbJjE8R1JdaHN-iZSfqrXAy9bh7PcCDRgjLjlET1o"
        static let googleSessionSuccessor = "ibr_zrcpe0gjNTMiSAI2hHvxh1EmtH2ZrpB6c1kmWvTJOH8"
        /// A session opened by Facebook and rotated once: its first token is in the ledger of spent ones.
        static let facebookSession = UUID(uuidString: "018bcfe5-0000-7000-8000-000000000b03") ?? UUID()
        static var facebookSessionToken: String { namingToken(facebookSession, secret: 0x33) }
        static var facebookSessionSpentToken: String { namingToken(facebookSession, secret: 0x44) }

        /// `ibr_` + base64url(session id ‖ 32 secret bytes), as the previous release formed it.
        static func namingToken(_ session: UUID, secret: UInt8) -> String {
            let id = withUnsafeBytes(of: session.uuid) { Data($0) }
            return "ibr_" + Base64URL.encode(id + Data(repeating: secret, count: 32))
        }

        /// SHA-256 of the token's text: what the previous release stored.
        static func hash(_ token: String) -> Data { Data(SHA256.hash(data: Data(token.utf8))) }
    }

    /// Writes, with plain SQL against the schema of migration 0012 (the previous release), what
    /// that release would have stored for tenant `acme`: the tenant with an active signing key
    /// and an API key (every scope); Apple team TEAM000001 with its .p8, group and client
    /// com.acme.app (iOS, no nonce required); Google (web and iOS clients, hosted domain
    /// acme.example, on iOS and the web) and Facebook (app 1234567890 with its sealed secret,
    /// Limited Login, on iOS and Android) in `provider_configs`; Facebook attested for guideline
    /// 4.8; one account with an Apple identity (with Apple's refresh token sealed) and a Google
    /// identity, one with a Facebook identity; a live Apple session (a token naming its session),
    /// a live Google session (a legacy token, found by hash) and a Facebook session rotated once
    /// (its first token spent in `refresh_tokens`). Secrets are sealed under the contexts the
    /// previous release used, written out here.
    ///
    /// When a migration changes these tables, this function stays as it is: it is the
    /// previous release's data. Only the assertions follow the new shape.
    static func seedPreviousReleaseData(_ client: PostgresClient, appleKey: P256.Signing.PrivateKey) async throws {
        let logger = TestDatabase.logger
        let secrets = TestDatabase.secrets
        let tenant = Seed.tenantID
        let tenantText = tenant.lowercasedString

        try await client.query(
            "INSERT INTO tenants (id, slug, display_name, created_at, updated_at) VALUES (\(tenant), \(Seed.slug), 'Acme', now() - interval '30 days', now() - interval '30 days')",
            logger: logger)
        try await client.query(
            """
            INSERT INTO api_keys (id, tenant_id, name, prefix, key_hash, scopes)
            VALUES (\(UUID()), \(tenant), 'backend', \(String(Seed.apiKey.prefix(12))), \(Seed.hash(Seed.apiKey)),
                    ARRAY['sessions', 'accounts', 'tenant'])
            """, logger: logger)

        let signing = P256.Signing.PrivateKey()
        let kid = JWKThumbprint.ec(publicKey: signing.publicKey)
        let sealedSigningKey = try secrets.seal(signing.rawRepresentation, context: "signing_key:\(tenantText):\(kid)")
        try await client.query(
            """
            INSERT INTO signing_keys (id, tenant_id, kid, public_key, private_key_sealed, created_at, activates_at)
            VALUES (\(UUID()), \(tenant), \(kid), \(signing.publicKey.x963Representation), \(sealedSigningKey),
                    now() - interval '30 days', now() - interval '30 days')
            """, logger: logger)

        let (team, group) = (UUID(), UUID())
        let sealedP8 = try secrets.seal(Data(appleKey.pemRepresentation.utf8), context: "apple_p8:\(tenantText):\(Seed.teamID)")
        try await client.query(
            "INSERT INTO apple_teams (id, tenant_id, team_id, key_id, private_key_sealed) VALUES (\(team), \(tenant), \(Seed.teamID), \(Seed.keyID), \(sealedP8))",
            logger: logger)
        try await client.query(
            "INSERT INTO apple_app_groups (id, tenant_id, team_ref, primary_app_id) VALUES (\(group), \(tenant), \(team), \(Seed.appleClient))",
            logger: logger)
        try await client.query(
            """
            INSERT INTO apple_clients (id, tenant_id, group_id, client_id, kind, nonce_mode, nonce_required, platforms)
            VALUES (\(UUID()), \(tenant), \(group), \(Seed.appleClient), 'app', 'sha256', false, ARRAY['ios'])
            """, logger: logger)

        try await client.query(
            """
            INSERT INTO provider_configs (tenant_id, provider, platforms, client_ids, hosted_domain)
            VALUES (\(tenant), 'google', ARRAY['ios', 'web'], ARRAY[\(Seed.googleWebClient), \(Seed.googleIOSClient)], \(Seed.googleHostedDomain))
            """, logger: logger)
        let sealedAppSecret = try secrets.seal(
            Data(Seed.facebookAppSecret.utf8), context: "provider_secret:\(tenantText):facebook:\(Seed.facebookAppID)")
        try await client.query(
            """
            INSERT INTO provider_configs (tenant_id, provider, platforms, client_ids, secret_sealed, limited_login)
            VALUES (\(tenant), 'facebook', ARRAY['ios', 'android'], ARRAY[\(Seed.facebookAppID)], \(sealedAppSecret), true)
            """, logger: logger)
        try await client.query(
            "INSERT INTO provider_attestations (tenant_id, provider, attested_by) VALUES (\(tenant), 'facebook', 'operator')",
            logger: logger)

        try await client.query(
            """
            INSERT INTO accounts (id, tenant_id, given_name, family_name, email, email_verified, created_at, updated_at) VALUES
                (\(Seed.firstAccount), \(tenant), 'Grace', 'Hopper', 'grace@acme.example', true, now() - interval '20 days', now() - interval '20 days'),
                (\(Seed.secondAccount), \(tenant), 'Ada', 'Lovelace', 'ada@example.com', false, now() - interval '20 days', now() - interval '20 days')
            """, logger: logger)
        let (appleIdentity, googleIdentity, facebookIdentity) = (UUID(), UUID(), UUID())
        let sealedAppleRefresh = try secrets.seal(
            Data(Seed.appleRefreshToken.utf8), context: "apple_refresh:\(tenantText):\(Seed.teamID):\(Seed.appleSubject)")
        try await client.query(
            """
            INSERT INTO identities (id, tenant_id, account_id, provider, provider_scope, subject, email, email_verified,
                                    real_user_status, provider_refresh_token_sealed, last_sign_in_at)
            VALUES (\(appleIdentity), \(tenant), \(Seed.firstAccount), 'apple', \(Seed.teamID), \(Seed.appleSubject),
                    'grace@acme.example', true, 2, \(sealedAppleRefresh), now() - interval '1 day')
            """, logger: logger)
        try await client.query(
            """
            INSERT INTO identities (id, tenant_id, account_id, provider, provider_scope, subject, email, email_verified,
                                    given_name, family_name, attributes, last_sign_in_at)
            VALUES (\(googleIdentity), \(tenant), \(Seed.firstAccount), 'google', '', \(Seed.googleSubject), 'grace@acme.example',
                    true, 'Grace', 'Hopper', '{"hd": "acme.example"}'::jsonb, now() - interval '1 day')
            """, logger: logger)
        try await client.query(
            """
            INSERT INTO identities (id, tenant_id, account_id, provider, provider_scope, subject, email, attributes, last_sign_in_at)
            VALUES (\(facebookIdentity), \(tenant), \(Seed.secondAccount), 'facebook', \(Seed.facebookAppID), \(Seed.facebookUser),
                    'ada@example.com', '{"name": "Ada Lovelace"}'::jsonb, now() - interval '1 day')
            """, logger: logger)

        // Live sessions: 60 days absolute, 30 days idle, opened yesterday.
        for (session, account, identity, clientID, platform, idp, token, legacy) in [
            (Seed.appleSession, Seed.firstAccount, appleIdentity, Seed.appleClient, "ios", "apple", Seed.appleSessionToken, false),
            (Seed.googleSession, Seed.firstAccount, googleIdentity, Seed.googleWebClient, "web", "google", Seed.googleSessionToken, true),
            (
                Seed.facebookSession, Seed.secondAccount, facebookIdentity, Seed.facebookAppID, "android", "facebook",
                Seed.facebookSessionToken, false
            ),
        ] {
            try await client.query(
                """
                INSERT INTO sessions (id, tenant_id, account_id, identity_id, client_id, platform, idp, created_at, expires_at,
                                      refresh_token_hash, refresh_token_expires_at, refresh_token_legacy)
                VALUES (\(session), \(tenant), \(account), \(identity), \(clientID), \(platform), \(idp), now() - interval '1 day',
                        now() + interval '59 days', \(Seed.hash(token)), now() + interval '29 days', \(legacy))
                """, logger: logger)
        }
        try await client.query(
            """
            INSERT INTO refresh_tokens (id, tenant_id, session_id, token_hash, created_at, expires_at, used_at)
            VALUES (\(UUID()), \(tenant), \(Seed.facebookSession), \(Seed.hash(Seed.facebookSessionSpentToken)), now() - interval '1 day',
                    now() + interval '29 days', now() - interval '1 hour')
            """, logger: logger)
    }

    // MARK: The upgrade

    struct Upgraded {
        let client: any TestClientProtocol
        let mocks: MockProvidersServer.Mocks
        let database: Database

        func post(_ path: String, json: [String: Any]) async throws -> TestResponse {
            try await client.execute(
                uri: path, method: .post, headers: [.authorization: "Bearer \(Seed.apiKey)", .contentType: "application/json"],
                body: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: json)))
        }

        func get(_ path: String) async throws -> TestResponse {
            try await client.execute(uri: path, method: .get, headers: [.authorization: "Bearer \(Seed.apiKey)"])
        }

        func introspect(_ token: String) async throws -> [String: Any] {
            let response = try await post("/v1/sessions/introspect", json: ["token": token])
            #expect(response.status == .ok)
            return try response.json()
        }
    }

    /// MockIdP on loopback, a fresh database migrated to ``previousRelease``, the previous
    /// release's rows, the remaining migrations, then the current server on that database.
    static func upgrade(_ test: @Sendable @escaping (Upgraded) async throws -> Void) async throws {
        try await MockProvidersServer.with { mocks in
            mocks.facebook.registerApp(appID: Seed.facebookAppID, secret: Seed.facebookAppSecret)
            let appleKey = P256.Signing.PrivateKey()
            mocks.apple.registerTeam(Seed.teamID, keyID: Seed.keyID, publicKey: appleKey.publicKey)
            let endpoints = ProviderEndpoints(
                appleBaseURL: mocks.baseURL, googleKeysURL: MockGoogleIdP.jwksURL(base: mocks.baseURL),
                facebookGraphURL: MockFacebookIdP.graphURL(base: mocks.baseURL),
                facebookKeysURL: MockFacebookIdP.jwksURL(base: mocks.baseURL), timeoutSeconds: 10)
            try await TestDatabase.withFresh(migrated: false) { database, _ in
                let all = try Migration.bundled()
                let previous = all.filter { $0.version <= previousRelease }
                #expect(previous.map(\.version) == Array(1...previousRelease))
                try await database.migrator(migrations: previous).migrate()
                try await seedPreviousReleaseData(database.client, appleKey: appleKey)
                let applied = try await database.migrator().migrate()
                #expect(applied.map(\.version) == all.filter { $0.version > previousRelease }.map(\.version))

                let services = BrokerServices(
                    database: database, secrets: TestDatabase.secrets, publicURL: TestApp.publicURL, maxBodyBytes: 32_768,
                    endpoints: endpoints)
                let app = try buildApplication(services: services, host: "127.0.0.1", port: 0, logger: TestDatabase.logger)
                let background = Task { await services.backgroundTasks() }
                defer { background.cancel() }
                try await app.test(.router) { client in
                    try await test(Upgraded(client: client, mocks: mocks, database: database))
                }
            }
        }
    }

    // MARK: Assertions

    @Test func liveSessionsRefreshAndTheirTokensIntrospect() async throws {
        try await Self.upgrade { upgraded in
            // The Apple session's token, as the previous release issued it.
            let before = try await upgraded.introspect(Seed.appleSessionToken)
            #expect(before["active"] as? Bool == true)
            #expect(before["token_type"] as? String == "refresh_token")
            #expect(before["sid"] as? String == Seed.appleSession.lowercasedString)
            #expect(before["sub"] as? String == Seed.firstAccount.lowercasedString)

            let refreshed = try await upgraded.post("/v1/sessions/refresh", json: ["refresh_token": Seed.appleSessionToken])
            #expect(refreshed.status == .ok, "\(String(buffer: refreshed.body))")
            let body = try refreshed.json()
            // The successor is the one decision 0017 derives under the master key: a retry
            // after the upgrade gets the same one as before it.
            #expect(body["refresh_token"] as? String == Seed.appleSessionSuccessor)
            let access = try #require(body["access_token"] as? String)
            let claims = try await upgraded.introspect(access)
            #expect(claims["active"] as? Bool == true)
            #expect(claims["token_type"] as? String == "access_token")
            #expect(claims["sid"] as? String == Seed.appleSession.lowercasedString)
            #expect(claims["sub"] as? String == Seed.firstAccount.lowercasedString)
            #expect(claims["idp"] as? String == "apple")
            #expect(claims["client_id"] as? String == Seed.appleClient)
            // Signed with the key the previous release sealed.
            #expect(try jwtClaims(access)["iss"] as? String == "\(TestApp.publicURL)/t/\(Seed.slug)")
            let next = try await upgraded.post("/v1/sessions/refresh", json: ["refresh_token": Seed.appleSessionSuccessor])
            #expect(next.status == .ok)

            // The legacy token of the Google session is found by its hash.
            let legacy = try await upgraded.post("/v1/sessions/refresh", json: ["refresh_token": Seed.googleSessionToken])
            #expect(legacy.status == .ok, "\(String(buffer: legacy.body))")
            let legacyBody = try legacy.json()
            #expect(legacyBody["refresh_token"] as? String == Seed.googleSessionSuccessor)
            let legacyAccess = try #require(legacyBody["access_token"] as? String)
            let legacyClaims = try await upgraded.introspect(legacyAccess)
            #expect(legacyClaims["active"] as? Bool == true)
            #expect(legacyClaims["sid"] as? String == Seed.googleSession.lowercasedString)
            #expect(legacyClaims["idp"] as? String == "google")

            // The Facebook session's first token, spent an hour ago: reuse, the family ends.
            #expect(try await upgraded.introspect(Seed.facebookSessionToken)["active"] as? Bool == true)
            let reused = try await upgraded.post("/v1/sessions/refresh", json: ["refresh_token": Seed.facebookSessionSpentToken])
            #expect(reused.problemCode == "invalid_grant")
            let afterReuse = try await upgraded.post("/v1/sessions/refresh", json: ["refresh_token": Seed.facebookSessionToken])
            #expect(afterReuse.problemCode == "invalid_grant", "the family of a reused token is revoked")
        }
    }

    @Test func signInsLandInTheAccountsTheyHadBefore() async throws {
        try await Self.upgrade { upgraded in
            let mocks = upgraded.mocks
            // Google: the hosted domain setting came along, so a token without it is refused.
            let withoutDomain = try mocks.google.mint(
                mocks.google.claims(subject: Seed.googleSubject, audience: Seed.googleWebClient, email: "grace@gmail.com"))
            #expect(
                try await upgraded.post("/v1/sign-in/google", json: ["id_token": withoutDomain]).problemCode == "hosted_domain_mismatch")
            let google = try mocks.google.mint(
                mocks.google.claims(
                    subject: Seed.googleSubject, audience: Seed.googleWebClient, email: "grace@acme.example",
                    hostedDomain: Seed.googleHostedDomain, name: "Grace Hopper"))
            let viaGoogle = try await upgraded.post("/v1/sign-in/google", json: ["id_token": google])
            #expect(viaGoogle.status == .ok, "\(String(buffer: viaGoogle.body))")
            let googleBody = try viaGoogle.json()
            #expect(googleBody["is_new_account"] as? Bool == false)
            #expect(googleBody[path: "account.id"] as? String == Seed.firstAccount.lowercasedString)
            #expect(googleBody[path: "identity.provider"] as? String == "google")
            let googleAccess = try #require(googleBody[path: "session.access_token"] as? String)
            #expect(try await upgraded.introspect(googleAccess)["active"] as? Bool == true)

            // Apple: the team, group and client rows resolve; the identity is the team's.
            let apple = try mocks.apple.mint(
                mocks.apple.claims(subject: Seed.appleSubject, audience: Seed.appleClient, email: "grace@acme.example"))
            let viaApple = try await upgraded.post("/v1/sign-in/apple", json: ["client_id": Seed.appleClient, "identity_token": apple])
            #expect(viaApple.status == .ok, "\(String(buffer: viaApple.body))")
            let appleBody = try viaApple.json()
            #expect(appleBody["is_new_account"] as? Bool == false)
            #expect(appleBody[path: "account.id"] as? String == Seed.firstAccount.lowercasedString)

            // Facebook: a classic token is checked at Graph with a proof under the sealed app secret.
            let token = mocks.facebook.issueAccessToken(
                appID: Seed.facebookAppID, userID: Seed.facebookUser, name: "Ada Lovelace", email: "ada@example.com")
            let viaFacebook = try await upgraded.post("/v1/sign-in/facebook", json: ["access_token": token])
            #expect(viaFacebook.status == .ok, "\(String(buffer: viaFacebook.body))")
            let facebookBody = try viaFacebook.json()
            #expect(facebookBody["is_new_account"] as? Bool == false)
            #expect(facebookBody[path: "account.id"] as? String == Seed.secondAccount.lowercasedString)
            #expect(mocks.facebook.receivedProofs.contains { $0.token == token })

            let rows = try await upgraded.database.client.query("SELECT count(*)::int8 FROM accounts", logger: TestDatabase.logger)
            for try await count in rows.decode(Int.self) { #expect(count == 2, "no account was created") }
        }
    }

    @Test func loginOptionsListTheProvidersAndTheAttestationStillCounts() async throws {
        try await Self.upgrade { upgraded in
            let response = try await upgraded.get("/v1/login-options?platform=ios")
            #expect(response.status == .ok, "\(String(buffer: response.body))")
            let ios = try response.json()
            let options = ios["options"] as? [[String: Any]] ?? []
            let providers = options.compactMap { $0["provider"] as? String }
            #expect(Set(providers) == ["apple", "google", "facebook"], "\(providers)")
            func option(_ name: String) -> [String: Any] { options.first { $0["provider"] as? String == name } ?? [:] }
            // Facebook was attested: it qualifies under the privacy-equivalent mode; Google was not.
            #expect(option("facebook")["qualifies"] as? Bool == true)
            #expect(option("google")["qualifies"] as? Bool == false)
            #expect(option("facebook")["nonce_mode"] as? String == "raw", "Limited Login came along")
            #expect(option("google")["client_ids"] as? [String] == [Seed.googleWebClient, Seed.googleIOSClient])
            #expect(ios["policy"] is NSNull)

            let android = try await upgraded.get("/v1/login-options?platform=android").json()
            #expect((android["options"] as? [[String: Any]] ?? []).compactMap { $0["provider"] as? String } == ["facebook"])
            let web = try await upgraded.get("/v1/login-options?platform=web").json()
            #expect((web["options"] as? [[String: Any]] ?? []).compactMap { $0["provider"] as? String } == ["google"])
        }
    }
}

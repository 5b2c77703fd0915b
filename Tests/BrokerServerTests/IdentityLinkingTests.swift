import BrokerCore
import BrokerServer
import Foundation
import HTTPTypes
import HummingbirdTesting
import MockIdP
import NIOCore
import PostgresNIO
import Storage
import Testing
import TestSupport

@testable import BrokerApplication
@testable import BrokerServer

/// `POST /v1/accounts/{id}/identities` and `DELETE /v1/accounts/{id}/identities/{identity_id}`
/// (issue 11): linking with proof of both sides, never a merge, unlinking with its sessions.
@Suite struct IdentityLinkingTests {
    typealias S = ProviderTestSetup
    static let accountToken = HTTPField.Name("X-Account-Token")!

    /// Tenant `acme` of ``ProviderTestSetup`` with Apple added (group com.acme.app, no nonce required).
    static func run(_ test: @Sendable @escaping (S) async throws -> Void) async throws {
        try await S.run { setup in
            let apple = AppleAdmin(database: setup.app.database, actor: "test")
            _ = try await apple.setTeam(
                tenant: "acme", teamID: "TEAM000001", keyID: "KEY0000001", p8PEM: S.p8PEM, secrets: setup.app.secrets)
            _ = try await apple.addGroup(tenant: "acme", primaryAppID: "com.acme.app", nonceRequired: false)
            try await test(setup)
        }
    }

    /// A signed-in account: its id, access token and refresh token.
    struct SignedIn {
        let accountID: String
        let accessToken: String
        let refreshToken: String
        let body: [String: Any]
    }

    static func appleToken(_ setup: S, subject: String, email: String? = "person@example.com", isPrivateEmail: Bool = false) throws
        -> String
    {
        try setup.mocks.apple.mint(
            setup.mocks.apple.claims(subject: subject, audience: "com.acme.app", email: email, isPrivateEmail: isPrivateEmail))
    }

    static func signIn(_ setup: S, _ provider: String, _ body: [String: Any], tenant: String = "acme") async throws -> SignedIn {
        let response = try await setup.post("/v1/sign-in/\(provider)", json: body, tenant: tenant)
        #expect(response.status == .ok, "\(String(buffer: response.body))")
        let json = try response.json()
        return SignedIn(
            accountID: try #require(json[path: "account.id"] as? String),
            accessToken: try #require(json[path: "session.access_token"] as? String),
            refreshToken: try #require(json[path: "session.refresh_token"] as? String), body: json)
    }

    static func signInWithApple(_ setup: S, subject: String, email: String? = "person@example.com") async throws -> SignedIn {
        try await signIn(
            setup, "apple", ["client_id": "com.acme.app", "identity_token": try appleToken(setup, subject: subject, email: email)])
    }

    static func link(_ setup: S, account: String, token: String?, _ body: [String: Any], tenant: String = "acme") async throws
        -> TestResponse
    {
        var headers: HTTPFields = [.authorization: "Bearer \(setup.keys[tenant] ?? "")", .contentType: "application/json"]
        if let token { headers[accountToken] = token }
        return try await setup.client.execute(
            uri: "/v1/accounts/\(account)/identities", method: .post, headers: headers,
            body: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body)))
    }

    static func unlink(_ setup: S, account: String, identity: String, token: String?) async throws -> TestResponse {
        var headers: HTTPFields = [.authorization: "Bearer \(setup.keys["acme"] ?? "")"]
        if let token { headers[accountToken] = token }
        return try await setup.client.execute(uri: "/v1/accounts/\(account)/identities/\(identity)", method: .delete, headers: headers)
    }

    static func google(_ setup: S, subject: String, email: String? = "person@gmail.com", verified: Bool = true) throws -> [String: Any] {
        [
            "provider": "google",
            "id_token": try setup.google.mint(
                setup.google.claims(subject: subject, audience: S.webClient, email: email, emailVerified: verified, name: "Grace Hopper")),
        ]
    }

    static func facebook(_ setup: S, user: String, email: String = "ada@example.com") -> [String: Any] {
        [
            "provider": "facebook",
            "access_token": setup.facebook.issueAccessToken(appID: S.appID, userID: user, name: "Ada Lovelace", email: email),
        ]
    }

    static func identities(_ setup: S, of account: String) async throws -> [[String: Any]] {
        let response = try await setup.client.execute(
            uri: "/v1/accounts/\(account)", method: .get, headers: [.authorization: "Bearer \(setup.keys["acme"] ?? "")"])
        return try response.json()["identities"] as? [[String: Any]] ?? []
    }

    static func auditActions(_ setup: S) async throws -> [String] {
        try await setup.app.database.auditLog.entries(tenantID: setup.tenant.id).map(\.action)
    }

    // MARK: - Linking

    @Test func eachProviderLinksToTheAccountAndSignsIntoItAfterwards() async throws {
        try await Self.run { setup in
            let person = try await Self.signInWithApple(setup, subject: "001.link-each")
            let google = try await Self.link(
                setup, account: person.accountID, token: person.accessToken, try Self.google(setup, subject: "g-each"))
            #expect(google.status == .created, "\(String(buffer: google.body))")
            let linked = try google.json()
            #expect(linked[path: "account.id"] as? String == person.accountID)
            #expect(linked[path: "identity.provider"] as? String == "google")
            #expect(linked[path: "identity.subject"] as? String == "g-each")
            #expect((linked["account"] as? [String: Any])?.keys.contains("name") == true)
            #expect(google.headers[.cacheControl] == "no-store")

            let facebook = try await Self.link(
                setup, account: person.accountID, token: person.accessToken, Self.facebook(setup, user: "20001"))
            #expect(facebook.status == .created, "\(String(buffer: facebook.body))")
            let nonce = "link-nonce-1"
            let limited = try setup.facebook.mint(setup.facebook.claims(subject: "20001", appID: S.appID, nonce: nonce))
            let again = try await Self.link(
                setup, account: person.accountID, token: person.accessToken,
                ["provider": "facebook", "limited_login_token": limited, "nonce": nonce])
            #expect(again.status == .ok, "Limited Login is the same Facebook person: \(String(buffer: again.body))")

            let providers = try await Self.identities(setup, of: person.accountID).compactMap { $0["provider"] as? String }
            #expect(providers.sorted() == ["apple", "facebook", "google"])
            // Each provider now signs into the one account.
            let viaGoogle = try await Self.signIn(setup, "google", ["id_token": try setup.googleToken(subject: "g-each")])
            #expect(viaGoogle.accountID == person.accountID)
            #expect(viaGoogle.body["is_new_account"] as? Bool == false)
            let viaFacebook = try await Self.signIn(
                setup, "facebook", ["access_token": setup.facebook.issueAccessToken(appID: S.appID, userID: "20001")])
            #expect(viaFacebook.accountID == person.accountID)
            #expect(try await setup.count("accounts") == 1)
            #expect(try await Self.auditActions(setup).filter { $0 == "identity.linked" }.count == 2)
        }
    }

    @Test func anAppleIdentityLinksToAGoogleAccount() async throws {
        try await Self.run { setup in
            let person = try await Self.signIn(setup, "google", ["id_token": try setup.googleToken(subject: "g-first")])
            let response = try await Self.link(
                setup, account: person.accountID, token: person.accessToken,
                ["provider": "apple", "client_id": "com.acme.app", "identity_token": try Self.appleToken(setup, subject: "001.second")])
            #expect(response.status == .created, "\(String(buffer: response.body))")
            #expect(try response.json()[path: "identity.provider_scope"] as? String == "TEAM000001")
            let viaApple = try await Self.signInWithApple(setup, subject: "001.second")
            #expect(viaApple.accountID == person.accountID)
        }
    }

    @Test func linkingAgainIsANoOpAnswered200() async throws {
        try await Self.run { setup in
            let person = try await Self.signInWithApple(setup, subject: "001.again")
            let first = try await Self.link(
                setup, account: person.accountID, token: person.accessToken, try Self.google(setup, subject: "g-again"))
            let second = try await Self.link(
                setup, account: person.accountID, token: person.accessToken, try Self.google(setup, subject: "g-again"))
            #expect(first.status == .created)
            #expect(second.status == .ok)
            #expect(try first.json()[path: "identity.id"] as? String == second.json()[path: "identity.id"] as? String)
            #expect(try await setup.count("identities") == 2)
            #expect(try await Self.auditActions(setup).filter { $0 == "identity.linked" }.count == 1)
        }
    }

    @Test func anIdentityOfAnotherAccountIsAConflictAndNothingMoves() async throws {
        try await Self.run { setup in
            let ada = try await Self.signInWithApple(setup, subject: "001.ada")
            let grace = try await Self.signIn(setup, "google", ["id_token": try setup.googleToken(subject: "g-grace")])
            let response = try await Self.link(
                setup, account: ada.accountID, token: ada.accessToken, try Self.google(setup, subject: "g-grace"))
            #expect(response.status == .conflict)
            #expect(response.problemCode == "identity_already_linked")
            #expect(try response.json()["account_id"] as? String == grace.accountID)
            #expect(response.headers[.contentType] == "application/problem+json")
            #expect(try await Self.identities(setup, of: ada.accountID).count == 1)
            #expect(try await Self.identities(setup, of: grace.accountID).count == 1)
            #expect(try await setup.count("accounts") == 2)
        }
    }

    @Test func theAccountTokenMustBeALiveTokenOfThatAccountAndTenant() async throws {
        try await Self.run { setup in
            let ada = try await Self.signInWithApple(setup, subject: "001.ada-token")
            let other = try await Self.signInWithApple(setup, subject: "001.other-token")
            let proof = try Self.google(setup, subject: "g-token")
            // Missing, junk, another account's, another tenant's.
            for token in [nil, "", "not-a-jwt", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", other.accessToken] as [String?] {
                let response = try await Self.link(setup, account: ada.accountID, token: token, proof)
                #expect(response.status == .unauthorized, "\(token ?? "nil")")
                #expect(response.problemCode == "invalid_account_token")
            }
            let bravo = try await Self.signIn(
                setup, "google", ["id_token": try setup.googleToken(subject: "g-bravo", audience: S.bravoClient)], tenant: "bravo")
            let foreign = try await Self.link(setup, account: bravo.accountID, token: bravo.accessToken, proof)
            #expect(foreign.problemCode == "invalid_account_token")
            // Expired: a token of Ada's live session, well signed, that expired a minute ago.
            let tokens = SessionTokens(
                keys: TenantSigningKeys(database: setup.app.database, secrets: setup.app.secrets), publicURL: TestApp.publicURL)
            let sid = try #require(try jwtClaims(ada.accessToken)["sid"] as? String)
            var expiredAlready = setup.tenant
            expiredAlready.session.accessTokenTTL = -60
            let expired = try await tokens.accessToken(
                tenant: expiredAlready, accountID: try #require(UUID(uuidString: ada.accountID)),
                sessionID: try #require(UUID(uuidString: sid)), idp: "apple", clientID: "com.acme.app"
            ).token
            #expect(try jwtClaims(expired)["sub"] as? String == ada.accountID)
            #expect(try await Self.link(setup, account: ada.accountID, token: expired, proof).problemCode == "invalid_account_token")
            // Revoked: Ada signed out everywhere.
            _ = try await setup.post("/v1/accounts/\(ada.accountID)/sign-out", json: [:])
            #expect(
                try await Self.link(setup, account: ada.accountID, token: ada.accessToken, proof).problemCode == "invalid_account_token")
            #expect(try await setup.count("identities") == 3)
        }
    }

    @Test func aProofIsCheckedAsItsSignInChecksIt() async throws {
        try await Self.run { setup in
            let ada = try await Self.signInWithApple(setup, subject: "001.proof")
            func link(_ body: [String: Any]) async throws -> TestResponse {
                try await Self.link(setup, account: ada.accountID, token: ada.accessToken, body)
            }
            // Malformed bodies: refused before anything else.
            #expect(try await link([:]).problemCode == "invalid_request")
            #expect(try await link(["provider": "My Space", "id_token": "x"]).problemCode == "invalid_request")
            #expect(try await link(["provider": "google"]).problemCode == "invalid_request")
            #expect(try await link(["provider": "apple", "identity_token": "x"]).problemCode == "invalid_request")
            // An id the tenant never configured, as sign-in words it.
            let unknown = try await link(["provider": "myspace", "id_token": "x"])
            #expect(unknown.status == .notFound)
            #expect(unknown.problemCode == "unknown_provider")
            // Rejected proofs, as sign-in words them.
            #expect(try await link(["provider": "google", "id_token": "a.b.c"]).status == .unauthorized)
            let foreignAudience = try setup.googleToken(subject: "g-aud", audience: S.bravoClient)
            #expect(try await link(["provider": "google", "id_token": foreignAudience]).problemCode == "audience_mismatch")
            let bravoLink = try await Self.link(
                setup, account: ada.accountID, token: ada.accessToken, ["provider": "facebook", "access_token": "EAAx"], tenant: "plain")
            #expect(bravoLink.problemCode == "invalid_account_token", "a plain-tenant key cannot act on acme's account")
            #expect(try await setup.count("identities") == 1)
        }
    }

    @Test func aGraphOutageIs503AndLinksNothing() async throws {
        try await Self.run { setup in
            let ada = try await Self.signInWithApple(setup, subject: "001.graph")
            setup.facebook.debugTokenFault = .unavailable
            let response = try await Self.link(setup, account: ada.accountID, token: ada.accessToken, Self.facebook(setup, user: "20077"))
            #expect(response.status == .serviceUnavailable)
            #expect(try await setup.count("identities") == 1)
            setup.facebook.debugTokenFault = .none
            #expect(
                try await Self.link(setup, account: ada.accountID, token: ada.accessToken, Self.facebook(setup, user: "20077")).status
                    == .created)
        }
    }

    // MARK: - Unlinking

    @Test func unlinkingRevokesTheSessionsOpenedThroughTheIdentity() async throws {
        try await Self.run { setup in
            let viaApple = try await Self.signInWithApple(setup, subject: "001.unlink")
            let linked = try await Self.link(
                setup, account: viaApple.accountID, token: viaApple.accessToken, try Self.google(setup, subject: "g-unlink"))
            let googleIdentity = try #require(try linked.json()[path: "identity.id"] as? String)
            let viaGoogle = try await Self.signIn(setup, "google", ["id_token": try setup.googleToken(subject: "g-unlink")])
            #expect(viaGoogle.accountID == viaApple.accountID)

            let response = try await Self.unlink(setup, account: viaApple.accountID, identity: googleIdentity, token: viaApple.accessToken)
            #expect(response.status == .ok, "\(String(buffer: response.body))")
            let body = try response.json()
            #expect(body["revoked_sessions"] as? Int == 1)
            #expect(body[path: "identity.id"] as? String == googleIdentity)
            #expect(try await Self.identities(setup, of: viaApple.accountID).compactMap { $0["provider"] as? String } == ["apple"])
            // The Google session is over; the Apple one lives on.
            let refreshGoogle = try await setup.post("/v1/sessions/refresh", json: ["refresh_token": viaGoogle.refreshToken])
            #expect(refreshGoogle.status == .badRequest)
            let refreshApple = try await setup.post("/v1/sessions/refresh", json: ["refresh_token": viaApple.refreshToken])
            #expect(refreshApple.status == .ok)
            #expect(try await Self.auditActions(setup).contains("identity.unlinked"))
            // Google now signs in to a new account of its own.
            let afterwards = try await Self.signIn(setup, "google", ["id_token": try setup.googleToken(subject: "g-unlink")])
            #expect(afterwards.accountID != viaApple.accountID)
            #expect(afterwards.body["is_new_account"] as? Bool == true)
        }
    }

    @Test func theLastIdentityStaysAndForeignIdentitiesAreNotFound() async throws {
        try await Self.run { setup in
            let ada = try await Self.signInWithApple(setup, subject: "001.last")
            let grace = try await Self.signIn(setup, "google", ["id_token": try setup.googleToken(subject: "g-last")])
            let adaIdentity = try #require(ada.body[path: "identity.id"] as? String)
            let graceIdentity = try #require(grace.body[path: "identity.id"] as? String)
            let last = try await Self.unlink(setup, account: ada.accountID, identity: adaIdentity, token: ada.accessToken)
            #expect(last.status == .conflict)
            #expect(last.problemCode == "last_identity")
            let foreign = try await Self.unlink(setup, account: ada.accountID, identity: graceIdentity, token: ada.accessToken)
            #expect(foreign.status == .notFound)
            #expect(foreign.problemCode == "identity_not_found")
            #expect(
                try await Self.unlink(setup, account: ada.accountID, identity: "not-a-uuid", token: ada.accessToken).problemCode
                    == "identity_not_found")
            #expect(
                try await Self.unlink(setup, account: ada.accountID, identity: adaIdentity, token: grace.accessToken).problemCode
                    == "invalid_account_token")
            #expect(
                try await Self.unlink(setup, account: ada.accountID, identity: adaIdentity, token: nil).problemCode
                    == "invalid_account_token")
            #expect(try await setup.count("identities") == 2)
        }
    }

    // MARK: - Races

    @Test func twoAccountsRacingForOneIdentity() async throws {
        try await Self.run { setup in
            for round in 0..<6 {
                let ada = try await Self.signInWithApple(setup, subject: "001.race-a-\(round)")
                let bob = try await Self.signInWithApple(setup, subject: "001.race-b-\(round)")
                let proofA = try Self.google(setup, subject: "g-race-\(round)")
                let proofB = try Self.google(setup, subject: "g-race-\(round)")
                let (adaID, adaToken, bobID, bobToken) = (ada.accountID, ada.accessToken, bob.accountID, bob.accessToken)
                async let first = Self.link(setup, account: adaID, token: adaToken, proofA)
                async let second = Self.link(setup, account: bobID, token: bobToken, proofB)
                let statuses = [try await first.status, try await second.status].map(\.code).sorted()
                #expect(statuses == [201, 409], "round \(round)")
                let holders = try await Self.holders(setup, subject: "g-race-\(round)")
                #expect(holders.count == 1)
            }
        }
    }

    @Test func aLinkRacingTheFirstSignInOfTheSameIdentity() async throws {
        try await Self.run { setup in
            for round in 0..<6 {
                let ada = try await Self.signInWithApple(setup, subject: "001.first-\(round)")
                let subject = "g-first-race-\(round)"
                let proof = try Self.google(setup, subject: subject)
                let token = try setup.googleToken(subject: subject)
                let (adaID, adaToken) = (ada.accountID, ada.accessToken)
                async let linking = Self.link(setup, account: adaID, token: adaToken, proof)
                async let signingIn = setup.post("/v1/sign-in/google", json: ["id_token": token])
                let (link, signIn) = (try await linking, try await signingIn)
                #expect(signIn.status == .ok)
                let holders = try await Self.holders(setup, subject: subject)
                #expect(holders.count == 1, "round \(round)")
                let signedInto = try signIn.json()[path: "account.id"] as? String
                #expect(holders.first == signedInto)
                if link.status == .created {
                    #expect(signedInto == ada.accountID)
                } else {
                    #expect(link.status == .conflict)
                    #expect(try link.json()["account_id"] as? String == signedInto)
                }
            }
        }
    }

    static func holders(_ setup: S, subject: String) async throws -> [String] {
        let rows = try await setup.app.database.client.query(
            "SELECT account_id FROM identities WHERE tenant_id = \(setup.tenant.id) AND provider = 'google' AND subject = \(subject)")
        var found: [String] = []
        for try await id in rows.decode(UUID.self) { found.append(id.lowercasedString) }
        return found
    }
}

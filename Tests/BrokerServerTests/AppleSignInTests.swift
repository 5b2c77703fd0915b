import BrokerCore
import BrokerApplication
import BrokerServer
import Foundation
import HTTPTypes
import HummingbirdTesting
import Crypto
import JWTKit
import MockIdP
import PostgresNIO
import Storage
import Testing

@Suite struct AppleSignInTests {
    @Test func firstSignInCreatesTheAccountAndASession() async throws {
        try await AppleTestSetup.run { setup in
            let nonce = "raw-nonce-123"
            let body = try await setup.signIn([
                "client_id": "com.acme.app",
                "identity_token": try setup.token(
                    subject: "001234.abc.0001", nonce: AppleTestSetup.sha256Hex(nonce), email: "token@example.com"),
                "nonce": nonce,
                "user": ["name": ["firstName": "Ada", "lastName": "Lovelace"], "email": "user-object@example.com"],
            ])
            #expect(body["is_new_account"] as? Bool == true)
            #expect(body[path: "account.email"] as? String == "token@example.com", "email comes from the token")
            #expect(body[path: "account.email_verified"] as? Bool == true)
            #expect(body[path: "account.is_private_email"] as? Bool == false)
            #expect(body[path: "account.name.given_name"] as? String == "Ada")
            #expect(body[path: "account.name.family_name"] as? String == "Lovelace")
            #expect(body[path: "identity.provider"] as? String == "apple")
            #expect(body[path: "identity.subject"] as? String == "001234.abc.0001")
            #expect(body[path: "identity.provider_scope"] as? String == AppleTestSetup.teamID)
            #expect(body[path: "session.token_type"] as? String == "Bearer")
            #expect(body[path: "session.expires_in"] as? Int == 900)
            let refresh = try #require(body[path: "session.refresh_token"] as? String)
            #expect(refresh.hasPrefix("ibr_") && refresh.count >= 47)
            let access = try #require(body[path: "session.access_token"] as? String)
            #expect(access.split(separator: ".").count == 3)
        }
    }

    @Test func oneTeamOnePersonOneAccountAcrossAppAndWebClients() async throws {
        try await AppleTestSetup.run { setup in
            let first = try await setup.signIn([
                "client_id": "com.acme.app", "identity_token": try setup.token(subject: "sub-1", clientID: "com.acme.app"),
                "user": ["name": ["firstName": "Grace", "lastName": "Hopper"]],
            ])
            let viaWidget = try await setup.signIn([
                "client_id": "com.acme.app.widget",
                "identity_token": try setup.token(subject: "sub-1", clientID: "com.acme.app.widget"),
            ])
            let viaWeb = try await setup.signIn([
                "client_id": "com.acme.web", "identity_token": try setup.token(subject: "sub-1", clientID: "com.acme.web"),
                "user": ["name": ["firstName": "", "lastName": ""]],
            ])
            let id = try #require(first[path: "account.id"] as? String)
            #expect(viaWidget[path: "account.id"] as? String == id)
            #expect(viaWeb[path: "account.id"] as? String == id)
            #expect(viaWidget["is_new_account"] as? Bool == false && viaWeb["is_new_account"] as? Bool == false)
            // The name captured at the first authorization is never blanked.
            #expect(viaWeb[path: "account.name.given_name"] as? String == "Grace")
        }
    }

    @Test func differentTeamsAreDifferentAccounts() async throws {
        try await AppleTestSetup.run { setup in
            let other = P256SigningKeyPEM.make()
            let admin = AppleAdmin(database: setup.app.database, actor: "test")
            _ = try await admin.setTeam(
                tenant: "acme", teamID: "TEAM000002", keyID: "KEY0000002", p8PEM: other, secrets: setup.app.secrets)
            _ = try await admin.addGroup(tenant: "acme", primaryAppID: "com.other.app", teamID: "TEAM000002", nonceRequired: false)
            let a = try await setup.signIn(["client_id": "com.acme.app", "identity_token": try setup.token(subject: "same-sub")])
            let b = try await setup.signIn([
                "client_id": "com.other.app", "identity_token": try setup.token(subject: "same-sub", clientID: "com.other.app"),
            ])
            #expect(a[path: "account.id"] as? String != b[path: "account.id"] as? String)
            #expect(b[path: "identity.provider_scope"] as? String == "TEAM000002")
        }
    }

    @Test func intentRules() async throws {
        try await AppleTestSetup.run { setup in
            let unknown = try await setup.post(
                "/v1/sign-in/apple",
                json: ["client_id": "com.acme.app", "identity_token": try setup.token(subject: "new-person"), "intent": "sign_in"])
            #expect(unknown.status == .notFound)
            #expect(unknown.problemCode == "account_not_found")
            #expect(try await accountCount(setup) == 0, "sign_in for an unknown identity creates nothing")

            let created = try await setup.signIn([
                "client_id": "com.acme.app", "identity_token": try setup.token(subject: "new-person"), "intent": "sign_up",
            ])
            #expect(created["is_new_account"] as? Bool == true)
            let again = try await setup.signIn([
                "client_id": "com.acme.app", "identity_token": try setup.token(subject: "new-person"), "intent": "sign_up",
            ])
            #expect(again["is_new_account"] as? Bool == false)
            #expect(again[path: "account.id"] as? String == created[path: "account.id"] as? String)
            let signIn = try await setup.signIn([
                "client_id": "com.acme.app", "identity_token": try setup.token(subject: "new-person"), "intent": "sign_in",
            ])
            #expect(signIn["is_new_account"] as? Bool == false)
        }
    }

    @Test func emailUpdatesFromTheTokenAndRelayAddressesAreFlagged() async throws {
        try await AppleTestSetup.run { setup in
            _ = try await setup.signIn([
                "client_id": "com.acme.app", "identity_token": try setup.token(subject: "mail", email: "old@example.com"),
            ])
            let changed = try await setup.signIn([
                "client_id": "com.acme.app",
                "identity_token": try setup.token(subject: "mail", email: "abc123@privaterelay.appleid.com"),
            ])
            #expect(changed[path: "account.email"] as? String == "abc123@privaterelay.appleid.com")
            #expect(changed[path: "account.is_private_email"] as? Bool == true, "relay domain flags the address")
            let noEmail = try await setup.signIn([
                "client_id": "com.acme.app", "identity_token": try setup.token(subject: "mail", email: nil),
            ])
            #expect(noEmail[path: "account.email"] as? String == "abc123@privaterelay.appleid.com", "never blanked")
        }
    }

    @Test func concurrentFirstSignInsYieldOneAccount() async throws {
        try await AppleTestSetup.run { setup in
            // Eight tokens of one person (each token is accepted once: decision 0018).
            let tokens = try (0..<8).map { _ in try setup.token(subject: "racer") }
            let ids = try await withThrowingTaskGroup(of: String?.self, returning: [String?].self) { group in
                for token in tokens {
                    group.addTask {
                        try await setup.signIn(["client_id": "com.acme.app", "identity_token": token])[path: "account.id"] as? String
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(ids).count == 1 && ids.allSatisfy { $0 != nil })
            #expect(try await accountCount(setup) == 1)
        }
    }

    @Test func rejectedTokensAre401WithStableCodesAndNeverEchoTheToken() async throws {
        try await AppleTestSetup.run { setup in
            let hour: TimeInterval = 3_600
            let cases: [(String, [String: Any], String)] = [
                ("unknown client", ["client_id": "com.nobody.app", "identity_token": try setup.token(subject: "s")], "unknown_client"),
                (
                    "aud of another client",
                    ["client_id": "com.acme.app", "identity_token": try setup.token(subject: "s", clientID: "com.acme.web")],
                    "audience_mismatch"
                ),
                (
                    "expired",
                    [
                        "client_id": "com.acme.app",
                        "identity_token": try setup.token(subject: "s", issuedAt: Date().addingTimeInterval(-2 * hour)),
                    ],
                    "token_expired"
                ),
                (
                    "wrong nonce",
                    [
                        "client_id": "com.acme.app", "identity_token": try setup.token(subject: "s", nonce: AppleTestSetup.sha256Hex("a")),
                        "nonce": "b",
                    ],
                    "nonce_mismatch"
                ),
                (
                    "raw nonce sent to a sha256 client",
                    ["client_id": "com.acme.app", "identity_token": try setup.token(subject: "s", nonce: "plain"), "nonce": "plain"],
                    "nonce_mismatch"
                ),
                (
                    "forged",
                    [
                        "client_id": "com.acme.app",
                        "identity_token": try setup.apple.mint(
                            setup.apple.claims(subject: "s", audience: "com.acme.app"), forgery: .hs256WithPublicKey),
                    ],
                    "invalid_token"
                ),
                ("garbage", ["client_id": "com.acme.app", "identity_token": "not.a.jwt"], "invalid_token"),
            ]
            for (name, body, code) in cases {
                let response = try await setup.post("/v1/sign-in/apple", json: body)
                #expect(response.status == .unauthorized, "\(name)")
                #expect(response.problemCode == code, "\(name): \(String(buffer: response.body))")
                if let token = body["identity_token"] as? String, token.count > 20 {
                    #expect(!String(buffer: response.body).contains(token.prefix(40)), "\(name) echoes the token")
                }
            }
            #expect(try await accountCount(setup) == 0)
        }
    }

    @Test func rawNonceClientsCompareAsIs() async throws {
        try await AppleTestSetup.run { setup in
            let ok = try await setup.signIn([
                "client_id": "com.acme.raw", "identity_token": try setup.token(subject: "r", clientID: "com.acme.raw", nonce: "n-1"),
                "nonce": "n-1",
            ])
            #expect(ok["is_new_account"] as? Bool == true)
            let hashed = try await setup.post(
                "/v1/sign-in/apple",
                json: [
                    "client_id": "com.acme.raw",
                    "identity_token": try setup.token(subject: "r", clientID: "com.acme.raw", nonce: AppleTestSetup.sha256Hex("n-1")),
                    "nonce": "n-1",
                ])
            #expect(hashed.problemCode == "nonce_mismatch")
        }
    }

    @Test func authorizationCodeIsExchangedAndAppleRefreshTokenKept() async throws {
        try await AppleTestSetup.run { setup in
            let code = setup.apple.issueCode(clientID: "com.acme.app", subject: "coder")
            let body = try await setup.signIn([
                "client_id": "com.acme.app", "identity_token": try setup.token(subject: "coder"), "authorization_code": code,
            ])
            #expect(body[path: "identity.has_provider_refresh_token"] as? Bool == true)

            // The same code again: Apple says invalid_grant, the broker says what to fix.
            let reused = try await setup.post(
                "/v1/sign-in/apple",
                json: ["client_id": "com.acme.app", "identity_token": try setup.token(subject: "coder"), "authorization_code": code])
            #expect(reused.status == .badRequest)
            #expect(reused.problemCode == "apple_invalid_grant")

            // A code for another user is refused.
            let otherCode = setup.apple.issueCode(clientID: "com.acme.app", subject: "someone-else")
            let mismatch = try await setup.post(
                "/v1/sign-in/apple",
                json: ["client_id": "com.acme.app", "identity_token": try setup.token(subject: "coder"), "authorization_code": otherCode])
            #expect(mismatch.problemCode == "subject_mismatch")
        }
    }

    @Test func aWrongTeamKeyIsReportedAsInvalidClient() async throws {
        try await AppleTestSetup.run { setup in
            // Replace the team's .p8 with a key Apple (the mock) does not know.
            _ = try await AppleAdmin(database: setup.app.database, actor: "test").setTeam(
                tenant: "acme", teamID: AppleTestSetup.teamID, keyID: AppleTestSetup.keyID, p8PEM: P256SigningKeyPEM.make(),
                secrets: setup.app.secrets)
            let response = try await setup.post(
                "/v1/sign-in/apple",
                json: [
                    "client_id": "com.acme.app", "identity_token": try setup.token(subject: "k"),
                    "authorization_code": setup.apple.issueCode(clientID: "com.acme.app", subject: "k"),
                ])
            #expect(response.problemCode == "apple_invalid_client")
            #expect(String(buffer: response.body).contains("key id"))
        }
    }

    func accountCount(_ setup: AppleTestSetup) async throws -> Int {
        let rows = try await setup.app.database.client.query("SELECT count(*)::int FROM accounts")
        var count = 0
        for try await value in rows.decode(Int.self) { count = value }
        return count
    }
}

enum P256SigningKeyPEM {
    static func make() -> String { P256.Signing.PrivateKey().pemRepresentation }
}

extension AppleSignInTests {
    /// A signing key that cannot be opened fails the sign-in before anything is committed: the
    /// identity token is not spent and no account is created, so the retry after the fix is
    /// the person's first sign-in (issue 39 B8: 500 after the commit, then `is_new_account`
    /// false on the retry).
    @Test func anUnreadableSigningKeyFailsTheSignInBeforeItCommits() async throws {
        try await AppleTestSetup.run { setup in
            let database = setup.app.database
            let rows = try await database.client.query(
                "SELECT private_key_sealed FROM signing_keys WHERE tenant_id = \(setup.tenant.id)"
            ).collect()
            let sealed = try #require(try rows.first?.decode(Data.self))
            try await database.client.query(
                "UPDATE signing_keys SET private_key_sealed = \(Data([1] + Array(repeating: 0, count: 60))) WHERE tenant_id = \(setup.tenant.id)"
            )
            let token = try setup.token(subject: "unsigned")
            let failed = try await setup.post("/v1/sign-in/apple", json: ["client_id": "com.acme.app", "identity_token": token])
            #expect(failed.status == .internalServerError)
            #expect(failed.problemCode == "secret_unreadable")
            let accounts = try await database.client.query("SELECT count(*)::int FROM accounts").collect()
            #expect(try accounts.first?.decode(Int.self) == 0, "nothing was committed")
            // The key is mended (and the cache told): the same token signs the person in, new.
            try await database.client.query("UPDATE signing_keys SET private_key_sealed = \(sealed) WHERE tenant_id = \(setup.tenant.id)")
            setup.app.services.signingKeys.invalidate(setup.tenant.id)
            let body = try await setup.signIn(["client_id": "com.acme.app", "identity_token": token])
            #expect(body["is_new_account"] as? Bool == true)
        }
    }
}

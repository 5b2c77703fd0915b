import BrokerCore
import BrokerApplication
import BrokerServer
import NIOCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import MockIdP
import TestSupport
import Testing

/// `POST /v1/sign-in/google` against MockIdP's Google on loopback.
@Suite struct GoogleSignInTests {
    typealias S = ProviderTestSetup

    @Test func aFirstSignInCreatesTheAccountAndTheSecondFindsIt() async throws {
        try await S.run { setup in
            let first = try await setup.post("/v1/sign-in/google", json: ["id_token": try setup.googleToken(subject: "g-0001")])
            #expect(first.status == .ok)
            #expect(first.headers[.cacheControl] == "no-store")
            let body = try first.json()
            #expect(body["is_new_account"] as? Bool == true)
            #expect(body[path: "identity.provider"] as? String == "google")
            #expect(body[path: "identity.provider_scope"] as? String == "")
            #expect(body[path: "identity.subject"] as? String == "g-0001")
            #expect(body[path: "account.email"] as? String == "person@gmail.com")
            #expect(body[path: "account.email_verified"] as? Bool == true)
            #expect(body[path: "account.name.given_name"] as? String == "Grace")
            #expect(body[path: "account.name.family_name"] as? String == "Hopper")
            let again = try await setup.post("/v1/sign-in/google", json: ["id_token": try setup.googleToken(subject: "g-0001")])
            let second = try again.json()
            #expect(second["is_new_account"] as? Bool == false)
            #expect(second[path: "account.id"] as? String == body[path: "account.id"] as? String)
        }
    }

    @Test func bothIssuerFormsAndEveryConfiguredClientAreAccepted() async throws {
        try await S.run { setup in
            let short = try setup.googleToken(subject: "g-iss", issuer: MockGoogleIdP.shortIssuer)
            #expect(try await setup.post("/v1/sign-in/google", json: ["id_token": short]).status == .ok)
            let ios = try setup.googleToken(subject: "g-iss", audience: S.iosClient)
            let viaIOS = try await setup.post("/v1/sign-in/google", json: ["id_token": ios, "client_id": S.iosClient])
            #expect(viaIOS.status == .ok)
            #expect(try viaIOS.json()["is_new_account"] as? Bool == false)
            // An Android token: aud is the web client, azp the Android one (also configured here: iOS).
            let android = try setup.googleToken(subject: "g-iss", audience: S.webClient, authorizedParty: S.iosClient)
            #expect(try await setup.post("/v1/sign-in/google", json: ["id_token": android]).status == .ok)
        }
    }

    @Test func theBodysClientIDMustBeTheTenantsAndTheTokensAudience() async throws {
        try await S.run { setup in
            let web = try setup.googleToken(subject: "g-aud")
            let wrongClient = try await setup.post("/v1/sign-in/google", json: ["id_token": web, "client_id": S.iosClient])
            #expect(wrongClient.status == .unauthorized)
            #expect(wrongClient.problemCode == "audience_mismatch")
            let unknown = try await setup.post("/v1/sign-in/google", json: ["id_token": web, "client_id": "someone-else"])
            #expect(unknown.status == .unauthorized)
            #expect(unknown.problemCode == "unknown_client")
            let foreignAudience = try setup.googleToken(subject: "g-aud", audience: "someone-else")
            #expect(try await setup.post("/v1/sign-in/google", json: ["id_token": foreignAudience]).problemCode == "audience_mismatch")
            #expect(try await setup.count("accounts") == 0)
        }
    }

    @Test func aForeignAuthorizedPartyIsRefused() async throws {
        try await S.run { setup in
            let token = try setup.googleToken(subject: "g-azp", authorizedParty: "attacker.apps.googleusercontent.com")
            let response = try await setup.post("/v1/sign-in/google", json: ["id_token": token])
            #expect(response.status == .unauthorized)
            #expect(response.problemCode == "audience_mismatch")
        }
    }

    @Test func aHostedDomainIsRequiredWhenConfigured() async throws {
        try await S.run(hostedDomain: "acme.example") { setup in
            let other = try setup.googleToken(subject: "g-hd", hostedDomain: "evil.example")
            #expect(try await setup.post("/v1/sign-in/google", json: ["id_token": other]).problemCode == "hosted_domain_mismatch")
            let consumer = try setup.googleToken(subject: "g-hd")
            #expect(try await setup.post("/v1/sign-in/google", json: ["id_token": consumer]).problemCode == "hosted_domain_mismatch")
            let workspace = try setup.googleToken(subject: "g-hd", email: "ada@acme.example", hostedDomain: "acme.example")
            let response = try await setup.post("/v1/sign-in/google", json: ["id_token": workspace])
            #expect(response.status == .ok)
            #expect(try response.json()[path: "identity.attributes.hd"] as? String == "acme.example")
        }
    }

    @Test func theRawNonceIsComparedWhenSent() async throws {
        try await S.run { setup in
            let token = try setup.googleToken(subject: "g-nonce", nonce: "raw-nonce-1")
            let mismatch = try await setup.post("/v1/sign-in/google", json: ["id_token": token, "nonce": "raw-nonce-2"])
            #expect(mismatch.problemCode == "nonce_mismatch")
            let match = try await setup.post("/v1/sign-in/google", json: ["id_token": token, "nonce": "raw-nonce-1"])
            #expect(match.status == .ok)
        }
    }

    @Test func aTenantWithoutGoogleGetsProviderNotEnabledBeforeAnyKeyFetch() async throws {
        try await S.run { setup in
            let fetches = setup.google.keyFetches
            let response = try await setup.post(
                "/v1/sign-in/google", json: ["id_token": try setup.googleToken(subject: "g-plain")], tenant: "plain")
            #expect(response.status == .badRequest)
            #expect(response.problemCode == "provider_not_enabled")
            #expect(setup.google.keyFetches == fetches)
            #expect(try await setup.count("accounts") == 0)
        }
    }

    @Test func oneTenantsGoogleSettingsNeverAcceptAnotherTenantsClient() async throws {
        try await S.run { setup in
            let bravosToken = try setup.googleToken(subject: "g-cross", audience: S.bravoClient)
            let atAcme = try await setup.post("/v1/sign-in/google", json: ["id_token": bravosToken])
            #expect(atAcme.problemCode == "audience_mismatch")
            let named = try await setup.post("/v1/sign-in/google", json: ["id_token": bravosToken, "client_id": S.bravoClient])
            #expect(named.problemCode == "unknown_client")
            let atBravo = try await setup.post("/v1/sign-in/google", json: ["id_token": bravosToken], tenant: "bravo")
            #expect(atBravo.status == .ok)
        }
    }

    @Test func aReplayedIdTokenIsRefusedAndWritesNothing() async throws {
        try await S.run { setup in
            let token = try setup.googleToken(subject: "g-replay")
            #expect(try await setup.post("/v1/sign-in/google", json: ["id_token": token]).status == .ok)
            let sessions = try await setup.count("sessions")
            let replay = try await setup.post("/v1/sign-in/google", json: ["id_token": token])
            #expect(replay.status == .unauthorized)
            #expect(replay.problemCode == "token_replayed")
            #expect(try await setup.count("sessions") == sessions)
        }
    }

    @Test func malformedBodiesAndUnknownProvidersAreRefused() async throws {
        try await S.run { setup in
            #expect(try await setup.post("/v1/sign-in/google", json: [:]).problemCode == "invalid_request")
            #expect(try await setup.post("/v1/sign-in/google", json: ["id_token": 5]).problemCode == "invalid_request")
            #expect(
                try await setup.post("/v1/sign-in/google", json: ["id_token": "x", "intent": "merge"]).problemCode == "invalid_request")
            let duplicate = try await setup.client.execute(
                uri: "/v1/sign-in/google", method: .post,
                headers: [.authorization: "Bearer \(setup.keys["acme"] ?? "")", .contentType: "application/json"],
                body: ByteBuffer(string: #"{"id_token":"a","id_token":"b"}"#))
            #expect(duplicate.problemCode == "invalid_request")
            let unknown = try await setup.post("/v1/sign-in/github", json: ["id_token": "x"])
            #expect(unknown.status == .notFound)
            #expect(unknown.problemCode == "unknown_provider")
            let garbage = try await setup.post("/v1/sign-in/google", json: ["id_token": "not.a.jwt"])
            #expect(garbage.status == .unauthorized)
            #expect(garbage.problemCode == "invalid_token")
        }
    }

    @Test func onePersonThroughAppleAndGoogleHasTwoAccountsEachFoundAgain() async throws {
        try await S.run { setup in
            _ = try await AppleAdmin(database: setup.app.database, actor: "test").setTeam(
                tenant: "acme", teamID: "TEAM000001", keyID: "KEY0000001", p8PEM: ProviderTestSetup.p8PEM, secrets: setup.app.secrets)
            _ = try await AppleAdmin(database: setup.app.database, actor: "test").addGroup(
                tenant: "acme", primaryAppID: "com.acme.app", nonceRequired: false)
            func apple() throws -> String {
                try setup.mocks.apple.mint(
                    setup.mocks.apple.claims(subject: "001.same-person", audience: "com.acme.app", email: "same@example.com"))
            }
            let viaApple = try await setup.post("/v1/sign-in/apple", json: ["client_id": "com.acme.app", "identity_token": try apple()])
                .json()
            let viaGoogle = try await setup.post(
                "/v1/sign-in/google", json: ["id_token": try setup.googleToken(subject: "g-same", email: "same@example.com")]
            ).json()
            #expect(viaApple[path: "account.id"] as? String != viaGoogle[path: "account.id"] as? String)
            let appleAgain = try await setup.post("/v1/sign-in/apple", json: ["client_id": "com.acme.app", "identity_token": try apple()])
                .json()
            let googleAgain = try await setup.post(
                "/v1/sign-in/google", json: ["id_token": try setup.googleToken(subject: "g-same", email: "same@example.com")]
            ).json()
            #expect(appleAgain[path: "account.id"] as? String == viaApple[path: "account.id"] as? String)
            #expect(googleAgain[path: "account.id"] as? String == viaGoogle[path: "account.id"] as? String)
            #expect(try await setup.count("accounts") == 2)
        }
    }
}

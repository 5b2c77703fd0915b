import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import MockIdP
import Providers
import TestSupport
import Testing

/// `POST /v1/sign-in/facebook`: classic access tokens checked at MockIdP's Graph, and Limited
/// Login tokens.
@Suite struct FacebookSignInTests {
    typealias S = ProviderTestSetup

    func classic(_ setup: S, user: String = "10001", appID: String = S.appID, expiresAt: Date? = nil) -> String {
        setup.facebook.issueAccessToken(appID: appID, userID: user, name: "Ada Lovelace", email: "ada@example.com", expiresAt: expiresAt)
    }

    @Test func aClassicAccessTokenSignsInAndMayBeUsedAgain() async throws {
        try await S.run { setup in
            let token = classic(setup)
            let first = try await setup.post("/v1/sign-in/facebook", json: ["access_token": token])
            #expect(first.status == .ok)
            let body = try first.json()
            #expect(body["is_new_account"] as? Bool == true)
            #expect(body[path: "identity.provider"] as? String == "facebook")
            #expect(body[path: "identity.provider_scope"] as? String == S.appID)
            #expect(body[path: "identity.subject"] as? String == "10001")
            #expect(body[path: "identity.email_verified"] as? Bool == false)
            #expect(body[path: "account.email"] as? String == "ada@example.com")
            #expect(body[path: "account.email_verified"] as? Bool == false)
            #expect(body[path: "identity.attributes.name"] as? String == "Ada Lovelace")
            // A classic token is checked live at Facebook on each use; a second sign-in is normal.
            let again = try await setup.post("/v1/sign-in/facebook", json: ["access_token": token])
            #expect(again.status == .ok)
            #expect(try again.json()[path: "account.id"] as? String == body[path: "account.id"] as? String)
            // The proof Graph received is HMAC-SHA256 of the token under the app secret.
            let proofs = setup.facebook.receivedProofs.filter { $0.token == token }
            #expect(proofs.count == 2)
            #expect(proofs.allSatisfy { $0.proof == FacebookGraphClient.proof(token, appSecret: S.appSecret) })
            #expect(proofs.allSatisfy { $0.proof == MockFacebookIdP.appSecretProof(token: token, secret: S.appSecret) })
        }
    }

    @Test func tokensGraphDoesNotVouchForAreRefusedAndCreateNothing() async throws {
        try await S.run { setup in
            let otherApp = classic(setup, appID: S.otherAppID)
            #expect(try await setup.post("/v1/sign-in/facebook", json: ["access_token": otherApp]).problemCode == "invalid_token")
            let invalid = classic(setup)
            setup.facebook.invalidate(token: invalid)
            #expect(try await setup.post("/v1/sign-in/facebook", json: ["access_token": invalid]).problemCode == "invalid_token")
            let expired = classic(setup, expiresAt: Date().addingTimeInterval(-60))
            let response = try await setup.post("/v1/sign-in/facebook", json: ["access_token": expired])
            #expect(response.status == .unauthorized)
            #expect(response.problemCode == "invalid_token")
            #expect(try await setup.post("/v1/sign-in/facebook", json: ["access_token": "garbage"]).problemCode == "invalid_token")
            setup.facebook.meFault = .otherUser
            #expect(try await setup.post("/v1/sign-in/facebook", json: ["access_token": classic(setup)]).problemCode == "invalid_token")
            #expect(try await setup.count("accounts") == 0)
            #expect(try await setup.count("sessions") == 0)
        }
    }

    @Test(arguments: [MockFacebookIdP.GraphFault.internalError, .unavailable, .resetConnection, .hang])
    func graphDownIs503AndCreatesNothing(_ fault: MockFacebookIdP.GraphFault) async throws {
        try await S.run(graphTimeoutSeconds: 2) { setup in
            for place in ["debug_token", "me"] {
                setup.facebook.debugTokenFault = place == "debug_token" ? fault : .none
                setup.facebook.meFault = place == "me" ? fault : .none
                let started = ContinuousClock.now
                let response = try await setup.post("/v1/sign-in/facebook", json: ["access_token": classic(setup)])
                #expect(response.status == .serviceUnavailable, "\(place)")
                #expect(response.problemCode == "provider_unavailable", "\(place)")
                #expect(response.headers[.retryAfter] != nil)
                // provider_unavailable (not request_timeout, the 10 s request deadline's code):
                // the 2 s provider timeout ended it; the bound leaves room for a loaded machine.
                #expect(ContinuousClock.now - started < .seconds(9), "\(place): bounded by BROKER_PROVIDER_TIMEOUT")
            }
            setup.facebook.debugTokenFault = .none
            setup.facebook.meFault = .none
            #expect(try await setup.count("accounts") == 0)
            // Facebook back: the same kind of request succeeds.
            #expect(try await setup.post("/v1/sign-in/facebook", json: ["access_token": classic(setup)]).status == .ok)
        }
    }

    @Test func limitedLoginIsTheSamePersonAsClassicAndChecksItsNonce() async throws {
        try await S.run { setup in
            let viaClassic = try await setup.post("/v1/sign-in/facebook", json: ["access_token": classic(setup, user: "10042")]).json()
            let token = try setup.facebook.mint(
                setup.facebook.claims(subject: "10042", appID: S.appID, nonce: "ll-nonce", email: "ada@example.com", name: "Ada Lovelace"))
            let mismatch = try await setup.post("/v1/sign-in/facebook", json: ["limited_login_token": token, "nonce": "other"])
            #expect(mismatch.problemCode == "nonce_mismatch")
            let limited = try await setup.post("/v1/sign-in/facebook", json: ["limited_login_token": token, "nonce": "ll-nonce"])
            #expect(limited.status == .ok)
            let body = try limited.json()
            #expect(body["is_new_account"] as? Bool == false)
            #expect(body[path: "account.id"] as? String == viaClassic[path: "account.id"] as? String)
            let replay = try await setup.post("/v1/sign-in/facebook", json: ["limited_login_token": token, "nonce": "ll-nonce"])
            #expect(replay.problemCode == "token_replayed")
            let otherApp = try setup.facebook.mint(setup.facebook.claims(subject: "10042", appID: S.otherAppID, nonce: "n"))
            #expect(
                try await setup.post("/v1/sign-in/facebook", json: ["limited_login_token": otherApp, "nonce": "n"]).problemCode
                    == "audience_mismatch")
        }
    }

    @Test func limitedLoginNeedsTheTenantsSwitchAndANonce() async throws {
        try await S.run(limitedLogin: false) { setup in
            let token = try setup.facebook.mint(setup.facebook.claims(subject: "10043", appID: S.appID, nonce: "n"))
            let fetches = setup.facebook.keyFetches
            let off = try await setup.post("/v1/sign-in/facebook", json: ["limited_login_token": token, "nonce": "n"])
            #expect(off.status == .badRequest)
            #expect(off.problemCode == "provider_not_enabled")
            #expect(setup.facebook.keyFetches == fetches)
            let noNonce = try await setup.post("/v1/sign-in/facebook", json: ["limited_login_token": token])
            #expect(noNonce.problemCode == "invalid_request")
        }
    }

    @Test func oneProofPerRequestAndTenantsWithoutFacebookAreRefusedBeforeGraph() async throws {
        try await S.run { setup in
            let both = try await setup.post("/v1/sign-in/facebook", json: ["access_token": "a", "limited_login_token": "b", "nonce": "n"])
            #expect(both.problemCode == "invalid_request")
            #expect(try await setup.post("/v1/sign-in/facebook", json: [:]).problemCode == "invalid_request")
            let calls = setup.facebook.debugTokenCalls
            let plain = try await setup.post("/v1/sign-in/facebook", json: ["access_token": classic(setup)], tenant: "plain")
            #expect(plain.status == .badRequest)
            #expect(plain.problemCode == "provider_not_enabled")
            #expect(setup.facebook.debugTokenCalls == calls)
        }
    }

    @Test func theAccountReadListsGoogleAndFacebookIdentities() async throws {
        try await S.run { setup in
            for (path, body) in [
                ("/v1/sign-in/facebook", ["access_token": classic(setup, user: "10077")]),
                ("/v1/sign-in/google", ["id_token": try setup.googleToken(subject: "g-read", hostedDomain: nil)]),
            ] {
                let signedIn = try await setup.post(path, json: body).json()
                let id = try #require(signedIn[path: "account.id"] as? String)
                let read = try await setup.client.execute(
                    uri: "/v1/accounts/\(id)", method: .get, headers: [.authorization: "Bearer \(setup.keys["acme"] ?? "")"])
                #expect(read.status == .ok)
                let identities = try #require(try read.json()["identities"] as? [[String: Any]])
                #expect(identities.count == 1)
                #expect(identities.first?["provider"] as? String == signedIn[path: "identity.provider"] as? String)
                #expect(identities.first?["subject"] as? String == signedIn[path: "identity.subject"] as? String)
                #expect(identities.first?["provider_scope"] as? String == signedIn[path: "identity.provider_scope"] as? String)
            }
        }
    }
}

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
    // MARK: - Linking

    @Test func eachProviderLinksToTheAccountAndSignsIntoItAfterwards() async throws {
        try await LinkingRequests.run { setup in
            let person = try await LinkingRequests.signInWithApple(setup, subject: "001.link-each")
            let google = try await LinkingRequests.link(
                setup, account: person.accountID, token: person.accessToken, try LinkingRequests.google(setup, subject: "g-each"))
            #expect(google.status == .created, "\(String(buffer: google.body))")
            let linked = try google.json()
            #expect(linked[path: "account.id"] as? String == person.accountID)
            #expect(linked[path: "identity.provider"] as? String == "google")
            #expect(linked[path: "identity.subject"] as? String == "g-each")
            #expect((linked["account"] as? [String: Any])?.keys.contains("name") == true)
            #expect(google.headers[.cacheControl] == "no-store")

            let facebook = try await LinkingRequests.link(
                setup, account: person.accountID, token: person.accessToken, LinkingRequests.facebook(setup, user: "20001"))
            #expect(facebook.status == .created, "\(String(buffer: facebook.body))")
            let nonce = "link-nonce-1"
            let limited = try setup.facebook.mint(setup.facebook.claims(subject: "20001", appID: S.appID, nonce: nonce))
            let again = try await LinkingRequests.link(
                setup, account: person.accountID, token: person.accessToken,
                ["provider": "facebook", "limited_login_token": limited, "nonce": nonce])
            #expect(again.status == .ok, "Limited Login is the same Facebook person: \(String(buffer: again.body))")

            let providers = try await LinkingRequests.identities(setup, of: person.accountID).compactMap { $0["provider"] as? String }
            #expect(providers.sorted() == ["apple", "facebook", "google"])
            // Each provider now signs into the one account.
            let viaGoogle = try await LinkingRequests.signIn(setup, "google", ["id_token": try setup.googleToken(subject: "g-each")])
            #expect(viaGoogle.accountID == person.accountID)
            #expect(viaGoogle.body["is_new_account"] as? Bool == false)
            let viaFacebook = try await LinkingRequests.signIn(
                setup, "facebook", ["access_token": setup.facebook.issueAccessToken(appID: S.appID, userID: "20001")])
            #expect(viaFacebook.accountID == person.accountID)
            #expect(try await setup.count("accounts") == 1)
            #expect(try await LinkingRequests.auditActions(setup).filter { $0 == "identity.linked" }.count == 2)
        }
    }

    @Test func anAppleIdentityLinksToAGoogleAccount() async throws {
        try await LinkingRequests.run { setup in
            let person = try await LinkingRequests.signIn(setup, "google", ["id_token": try setup.googleToken(subject: "g-first")])
            let response = try await LinkingRequests.link(
                setup, account: person.accountID, token: person.accessToken,
                [
                    "provider": "apple", "client_id": "com.acme.app",
                    "identity_token": try LinkingRequests.appleToken(setup, subject: "001.second"),
                ])
            #expect(response.status == .created, "\(String(buffer: response.body))")
            #expect(try response.json()[path: "identity.provider_scope"] as? String == "TEAM000001")
            let viaApple = try await LinkingRequests.signInWithApple(setup, subject: "001.second")
            #expect(viaApple.accountID == person.accountID)
        }
    }

    @Test func linkingAgainIsANoOpAnswered200() async throws {
        try await LinkingRequests.run { setup in
            let person = try await LinkingRequests.signInWithApple(setup, subject: "001.again")
            let first = try await LinkingRequests.link(
                setup, account: person.accountID, token: person.accessToken, try LinkingRequests.google(setup, subject: "g-again"))
            let second = try await LinkingRequests.link(
                setup, account: person.accountID, token: person.accessToken, try LinkingRequests.google(setup, subject: "g-again"))
            #expect(first.status == .created)
            #expect(second.status == .ok)
            #expect(try first.json()[path: "identity.id"] as? String == second.json()[path: "identity.id"] as? String)
            #expect(try await setup.count("identities") == 2)
            #expect(try await LinkingRequests.auditActions(setup).filter { $0 == "identity.linked" }.count == 1)
        }
    }

    @Test func anIdentityOfAnotherAccountIsAConflictAndNothingMoves() async throws {
        try await LinkingRequests.run { setup in
            let ada = try await LinkingRequests.signInWithApple(setup, subject: "001.ada")
            let grace = try await LinkingRequests.signIn(setup, "google", ["id_token": try setup.googleToken(subject: "g-grace")])
            let response = try await LinkingRequests.link(
                setup, account: ada.accountID, token: ada.accessToken, try LinkingRequests.google(setup, subject: "g-grace"))
            #expect(response.status == .conflict)
            #expect(response.problemCode == "identity_already_linked")
            #expect(try response.json()["account_id"] as? String == grace.accountID)
            #expect(response.headers[.contentType] == "application/problem+json")
            #expect(try await LinkingRequests.identities(setup, of: ada.accountID).count == 1)
            #expect(try await LinkingRequests.identities(setup, of: grace.accountID).count == 1)
            #expect(try await setup.count("accounts") == 2)
        }
    }

    @Test func theAccountTokenMustBeALiveTokenOfThatAccountAndTenant() async throws {
        try await LinkingRequests.run { setup in
            let ada = try await LinkingRequests.signInWithApple(setup, subject: "001.ada-token")
            let other = try await LinkingRequests.signInWithApple(setup, subject: "001.other-token")
            let proof = try LinkingRequests.google(setup, subject: "g-token")
            // Missing, junk, another account's, another tenant's.
            for token in [nil, "", "not-a-jwt", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", other.accessToken] as [String?] {
                let response = try await LinkingRequests.link(setup, account: ada.accountID, token: token, proof)
                #expect(response.status == .unauthorized, "\(token ?? "nil")")
                #expect(response.problemCode == "invalid_account_token")
            }
            let bravo = try await LinkingRequests.signIn(
                setup, "google", ["id_token": try setup.googleToken(subject: "g-bravo", audience: S.bravoClient)], tenant: "bravo")
            let foreign = try await LinkingRequests.link(setup, account: bravo.accountID, token: bravo.accessToken, proof)
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
            #expect(
                try await LinkingRequests.link(setup, account: ada.accountID, token: expired, proof).problemCode == "invalid_account_token")
            // Revoked: Ada signed out everywhere.
            _ = try await setup.post("/v1/accounts/\(ada.accountID)/sign-out", json: [:])
            #expect(
                try await LinkingRequests.link(setup, account: ada.accountID, token: ada.accessToken, proof).problemCode
                    == "invalid_account_token")
            #expect(try await setup.count("identities") == 3)
        }
    }

    @Test func aProofIsCheckedAsItsSignInChecksIt() async throws {
        try await LinkingRequests.run { setup in
            let ada = try await LinkingRequests.signInWithApple(setup, subject: "001.proof")
            func link(_ body: [String: Any]) async throws -> TestResponse {
                try await LinkingRequests.link(setup, account: ada.accountID, token: ada.accessToken, body)
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
            let bravoLink = try await LinkingRequests.link(
                setup, account: ada.accountID, token: ada.accessToken, ["provider": "facebook", "access_token": "EAAx"], tenant: "plain")
            #expect(bravoLink.problemCode == "invalid_account_token", "a plain-tenant key cannot act on acme's account")
            #expect(try await setup.count("identities") == 1)
        }
    }

    @Test func aGraphOutageIs503AndLinksNothing() async throws {
        try await LinkingRequests.run { setup in
            let ada = try await LinkingRequests.signInWithApple(setup, subject: "001.graph")
            setup.facebook.debugTokenFault = .unavailable
            let response = try await LinkingRequests.link(
                setup, account: ada.accountID, token: ada.accessToken, LinkingRequests.facebook(setup, user: "20077"))
            #expect(response.status == .serviceUnavailable)
            #expect(try await setup.count("identities") == 1)
            setup.facebook.debugTokenFault = .none
            #expect(
                try await LinkingRequests.link(
                    setup, account: ada.accountID, token: ada.accessToken, LinkingRequests.facebook(setup, user: "20077")
                ).status
                    == .created)
        }
    }

    // MARK: - Unlinking

    @Test func unlinkingRevokesTheSessionsOpenedThroughTheIdentity() async throws {
        try await LinkingRequests.run { setup in
            let viaApple = try await LinkingRequests.signInWithApple(setup, subject: "001.unlink")
            let linked = try await LinkingRequests.link(
                setup, account: viaApple.accountID, token: viaApple.accessToken, try LinkingRequests.google(setup, subject: "g-unlink"))
            let googleIdentity = try #require(try linked.json()[path: "identity.id"] as? String)
            let viaGoogle = try await LinkingRequests.signIn(setup, "google", ["id_token": try setup.googleToken(subject: "g-unlink")])
            #expect(viaGoogle.accountID == viaApple.accountID)

            let response = try await LinkingRequests.unlink(
                setup, account: viaApple.accountID, identity: googleIdentity, token: viaApple.accessToken)
            #expect(response.status == .ok, "\(String(buffer: response.body))")
            let body = try response.json()
            #expect(body["revoked_sessions"] as? Int == 1)
            #expect(body[path: "identity.id"] as? String == googleIdentity)
            #expect(
                try await LinkingRequests.identities(setup, of: viaApple.accountID).compactMap { $0["provider"] as? String } == ["apple"])
            // The Google session is over; the Apple one lives on.
            let refreshGoogle = try await setup.post("/v1/sessions/refresh", json: ["refresh_token": viaGoogle.refreshToken])
            #expect(refreshGoogle.status == .badRequest)
            let refreshApple = try await setup.post("/v1/sessions/refresh", json: ["refresh_token": viaApple.refreshToken])
            #expect(refreshApple.status == .ok)
            #expect(try await LinkingRequests.auditActions(setup).contains("identity.unlinked"))
            // Google now signs in to a new account of its own.
            let afterwards = try await LinkingRequests.signIn(setup, "google", ["id_token": try setup.googleToken(subject: "g-unlink")])
            #expect(afterwards.accountID != viaApple.accountID)
            #expect(afterwards.body["is_new_account"] as? Bool == true)
        }
    }

    @Test func theLastIdentityStaysAndForeignIdentitiesAreNotFound() async throws {
        try await LinkingRequests.run { setup in
            let ada = try await LinkingRequests.signInWithApple(setup, subject: "001.last")
            let grace = try await LinkingRequests.signIn(setup, "google", ["id_token": try setup.googleToken(subject: "g-last")])
            let adaIdentity = try #require(ada.body[path: "identity.id"] as? String)
            let graceIdentity = try #require(grace.body[path: "identity.id"] as? String)
            let last = try await LinkingRequests.unlink(setup, account: ada.accountID, identity: adaIdentity, token: ada.accessToken)
            #expect(last.status == .conflict)
            #expect(last.problemCode == "last_identity")
            let foreign = try await LinkingRequests.unlink(setup, account: ada.accountID, identity: graceIdentity, token: ada.accessToken)
            #expect(foreign.status == .notFound)
            #expect(foreign.problemCode == "identity_not_found")
            #expect(
                try await LinkingRequests.unlink(setup, account: ada.accountID, identity: "not-a-uuid", token: ada.accessToken).problemCode
                    == "identity_not_found")
            #expect(
                try await LinkingRequests.unlink(setup, account: ada.accountID, identity: adaIdentity, token: grace.accessToken).problemCode
                    == "invalid_account_token")
            #expect(
                try await LinkingRequests.unlink(setup, account: ada.accountID, identity: adaIdentity, token: nil).problemCode
                    == "invalid_account_token")
            #expect(try await setup.count("identities") == 2)
        }
    }

    // MARK: - Races

    @Test func twoAccountsRacingForOneIdentity() async throws {
        try await LinkingRequests.run { setup in
            for round in 0..<6 {
                let ada = try await LinkingRequests.signInWithApple(setup, subject: "001.race-a-\(round)")
                let bob = try await LinkingRequests.signInWithApple(setup, subject: "001.race-b-\(round)")
                let proofA = try LinkingRequests.google(setup, subject: "g-race-\(round)")
                let proofB = try LinkingRequests.google(setup, subject: "g-race-\(round)")
                let (adaID, adaToken, bobID, bobToken) = (ada.accountID, ada.accessToken, bob.accountID, bob.accessToken)
                async let first = LinkingRequests.link(setup, account: adaID, token: adaToken, proofA)
                async let second = LinkingRequests.link(setup, account: bobID, token: bobToken, proofB)
                let statuses = [try await first.status, try await second.status].map(\.code).sorted()
                #expect(statuses == [201, 409], "round \(round)")
                let holders = try await LinkingRequests.holders(setup, subject: "g-race-\(round)")
                #expect(holders.count == 1)
            }
        }
    }

    @Test func aLinkRacingTheFirstSignInOfTheSameIdentity() async throws {
        try await LinkingRequests.run { setup in
            for round in 0..<6 {
                let ada = try await LinkingRequests.signInWithApple(setup, subject: "001.first-\(round)")
                let subject = "g-first-race-\(round)"
                let proof = try LinkingRequests.google(setup, subject: subject)
                let token = try setup.googleToken(subject: subject)
                let (adaID, adaToken) = (ada.accountID, ada.accessToken)
                async let linking = LinkingRequests.link(setup, account: adaID, token: adaToken, proof)
                async let signingIn = setup.post("/v1/sign-in/google", json: ["id_token": token])
                let (link, signIn) = (try await linking, try await signingIn)
                #expect(signIn.status == .ok)
                let holders = try await LinkingRequests.holders(setup, subject: subject)
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

}

import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Storage
import Testing

@testable import BrokerApplication
@testable import BrokerServer

/// Issue 20 §3: an identity token is accepted once per tenant across sign-in and linking
/// (decision 0031). A token that linked does not sign in and does not link again, not even
/// after an unlink; a token that signed in is no proof for a link. The refused calls write
/// nothing.
@Suite struct LinkProofSpentTests {
    typealias S = ProviderTestSetup
    typealias L = LinkingRequests

    /// A proof of `provider` for `subject`: the token, the link body and the sign-in body.
    struct Proof {
        let token: String
        let link: [String: Any]
        let signIn: [String: Any]
    }

    static func proof(_ setup: S, _ provider: String, subject: String) throws -> Proof {
        switch provider {
        case "apple":
            let token = try L.appleToken(setup, subject: subject)
            return Proof(
                token: token, link: ["provider": "apple", "client_id": "com.acme.app", "identity_token": token],
                signIn: ["client_id": "com.acme.app", "identity_token": token])
        default:
            let token = try setup.googleToken(subject: subject)
            return Proof(token: token, link: ["provider": "google", "id_token": token], signIn: ["id_token": token])
        }
    }

    /// A person signed in through the other provider, who links `provider` next.
    static func host(_ setup: S, linking provider: String, name: String) async throws -> L.SignedIn {
        provider == "apple"
            ? try await L.signIn(setup, "google", ["id_token": try setup.googleToken(subject: "g-host-\(name)")])
            : try await L.signInWithApple(setup, subject: "001.host-\(name)")
    }

    /// What a refused call must leave alone: accounts, identities, the sessions people hold
    /// (link markers apart), the markers, and the `identity.linked` rows.
    static func written(_ setup: S) async throws -> [Int] {
        let rows = try await setup.app.database.client.query(
            """
            SELECT (SELECT count(*) FROM accounts)::int8, (SELECT count(*) FROM identities)::int8,
                (SELECT count(*) FROM sessions WHERE revoke_reason IS DISTINCT FROM 'link_proof')::int8,
                (SELECT count(*) FROM sessions WHERE revoke_reason = 'link_proof')::int8,
                (SELECT count(*) FROM audit_log WHERE action = 'identity.linked')::int8
            """)
        for try await (accounts, identities, sessions, markers, linked) in rows.decode((Int, Int, Int, Int, Int).self) {
            return [accounts, identities, sessions, markers, linked]
        }
        return []
    }

    @Test(arguments: ["google", "apple"])
    func aTokenThatLinkedDoesNotSignIn(provider: String) async throws {
        try await L.run { setup in
            let host = try await Self.host(setup, linking: provider, name: "signin")
            let proof = try Self.proof(setup, provider, subject: provider == "apple" ? "001.linked-signin" : "g-linked-signin")
            let linked = try await L.link(setup, account: host.accountID, token: host.accessToken, proof.link)
            #expect(linked.status == .created, "\(String(buffer: linked.body))")
            let before = try await Self.written(setup)
            #expect(before[3] == 1, "the link spent its proof")

            let signIn = try await setup.post("/v1/sign-in/\(provider)", json: proof.signIn)
            #expect(signIn.status == .unauthorized, "\(String(buffer: signIn.body))")
            #expect(signIn.problemCode == "token_replayed")
            #expect(try await Self.written(setup) == before, "the refused sign-in wrote nothing")

            // The spent token is no sign-in: the identity has never signed in, and the security
            // events show the link, not a session.
            let identity = try #require(
                try await L.identities(setup, of: host.accountID).first { $0["provider"] as? String == provider })
            #expect(identity["last_sign_in_at"] == nil)
            let events = try await setup.app.database.auditLog.securityEvents(
                tenantID: setup.tenant.id, accountID: UUID(uuidString: host.accountID), action: nil, limit: 50)
            #expect(events.filter { $0.action.hasPrefix("session.") }.count == 1, "\(events.map(\.action))")
            #expect(events.contains { $0.action == "identity.linked" })
            // Signing out everywhere counts the sessions people hold, not the marker.
            let signOut = try await setup.post("/v1/accounts/\(host.accountID)/sign-out", json: [:])
            #expect(try signOut.json()["revoked_sessions"] as? Int == 1)
            // A fresh token of the same person signs in to the account.
            let fresh = try Self.proof(setup, provider, subject: provider == "apple" ? "001.linked-signin" : "g-linked-signin")
            let again = try await L.signIn(setup, provider, fresh.signIn)
            #expect(again.accountID == host.accountID)
        }
    }

    @Test(arguments: ["google", "apple"])
    func aTokenThatLinkedDoesNotLinkAgain(provider: String) async throws {
        try await L.run { setup in
            let host = try await Self.host(setup, linking: provider, name: "twice")
            let proof = try Self.proof(setup, provider, subject: provider == "apple" ? "001.linked-twice" : "g-linked-twice")
            #expect(try await L.link(setup, account: host.accountID, token: host.accessToken, proof.link).status == .created)
            let before = try await Self.written(setup)
            let second = try await L.link(setup, account: host.accountID, token: host.accessToken, proof.link)
            #expect(second.status == .unauthorized, "\(String(buffer: second.body))")
            #expect(second.problemCode == "token_replayed")
            #expect(try await Self.written(setup) == before)
            // A fresh proof of the identity linked already is still the harmless 200.
            let fresh = try Self.proof(setup, provider, subject: provider == "apple" ? "001.linked-twice" : "g-linked-twice")
            #expect(try await L.link(setup, account: host.accountID, token: host.accessToken, fresh.link).status == .ok)
        }
    }

    @Test(arguments: ["google", "apple"])
    func aTokenStaysSpentAfterItsIdentityIsUnlinked(provider: String) async throws {
        try await L.run { setup in
            let first = try await Self.host(setup, linking: provider, name: "first")
            let second = try await Self.host(setup, linking: provider, name: "second")
            let subject = provider == "apple" ? "001.moved" : "g-moved"
            let proof = try Self.proof(setup, provider, subject: subject)
            let linked = try await L.link(setup, account: first.accountID, token: first.accessToken, proof.link)
            #expect(linked.status == .created)
            let identity = try #require(try linked.json()[path: "identity.id"] as? String)
            #expect(try await L.unlink(setup, account: first.accountID, identity: identity, token: first.accessToken).status == .ok)

            let before = try await Self.written(setup)
            let moved = try await L.link(setup, account: second.accountID, token: second.accessToken, proof.link)
            #expect(moved.status == .unauthorized, "\(String(buffer: moved.body))")
            #expect(moved.problemCode == "token_replayed")
            #expect(try await Self.written(setup) == before)
            #expect(try await L.identities(setup, of: second.accountID).count == 1)
            // The person, with a fresh token, may link the identity there.
            let fresh = try Self.proof(setup, provider, subject: subject)
            #expect(try await L.link(setup, account: second.accountID, token: second.accessToken, fresh.link).status == .created)
        }
    }

    @Test(arguments: ["google", "apple"])
    func aTokenThatSignedInIsNoLinkProof(provider: String) async throws {
        try await L.run { setup in
            // The token opened an account of its own: refused as spent, not 409 naming that account.
            let host = try await Self.host(setup, linking: provider, name: "signed-in")
            let proof = try Self.proof(setup, provider, subject: provider == "apple" ? "001.signed-in" : "g-signed-in")
            _ = try await L.signIn(setup, provider, proof.signIn)
            var before = try await Self.written(setup)
            let elsewhere = try await L.link(setup, account: host.accountID, token: host.accessToken, proof.link)
            #expect(elsewhere.status == .unauthorized, "\(String(buffer: elsewhere.body))")
            #expect(elsewhere.problemCode == "token_replayed")
            #expect(try elsewhere.json()["account_id"] == nil)
            #expect(try await Self.written(setup) == before)

            // The token signed in to the very account it is presented to link.
            let own = try Self.proof(setup, provider, subject: provider == "apple" ? "001.own" : "g-own")
            let person = try await L.signIn(setup, provider, own.signIn)
            before = try await Self.written(setup)
            let same = try await L.link(setup, account: person.accountID, token: person.accessToken, own.link)
            #expect(same.status == .unauthorized, "\(String(buffer: same.body))")
            #expect(same.problemCode == "token_replayed")
            #expect(try await Self.written(setup) == before)
        }
    }

    /// One token posted to link and to sign in at once: one of them takes it.
    @Test func aLinkAndASignInRacingWithOneToken() async throws {
        try await L.run { setup in
            for round in 0..<6 {
                let host = try await Self.host(setup, linking: "google", name: "race-\(round)")
                let token = try Self.proof(setup, "google", subject: "g-token-race-\(round)").token
                let (hostID, hostToken) = (host.accountID, host.accessToken)
                async let linking = L.link(setup, account: hostID, token: hostToken, ["provider": "google", "id_token": token])
                async let signingIn = setup.post("/v1/sign-in/google", json: ["id_token": token])
                let statuses = [try await linking.status.code, try await signingIn.status.code]
                #expect(statuses.filter { $0 == 401 }.count == 1, "round \(round): \(statuses)")
                #expect(statuses.contains(201) || statuses.contains(200), "round \(round): \(statuses)")
            }
        }
    }
}

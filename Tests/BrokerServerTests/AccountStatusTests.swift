import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Storage
import Testing

@testable import BrokerApplication
@testable import BrokerServer

/// Issue 20 §4: `POST /v1/accounts/{id}/disable` and `/enable`, and a disabled account refused
/// everywhere: sign-in, refresh, introspection of its access and refresh tokens, linking and
/// unlinking.
@Suite struct AccountStatusTests {
    typealias S = ProviderTestSetup
    typealias L = LinkingRequests

    @Test func disablingEndsTheSessionsAndRefusesTheAccountEverywhere() async throws {
        try await L.run { setup in
            let person = try await L.signInWithApple(setup, subject: "001.disabled")
            let linked = try await L.link(
                setup, account: person.accountID, token: person.accessToken, try L.google(setup, subject: "g-disabled"))
            #expect(linked.status == .created)
            let googleIdentity = try #require(try linked.json()[path: "identity.id"] as? String)
            let viaGoogle = try await L.signIn(setup, "google", ["id_token": try setup.googleToken(subject: "g-disabled")])
            #expect(try await AccountRequests.introspect(setup, viaGoogle.refreshToken) == true)

            let response = try await AccountRequests.change(setup, person.accountID, "disable")
            #expect(response.status == .ok, "\(String(buffer: response.body))")
            #expect(response.headers[.contentType] == "application/json; charset=utf-8")
            let body = try response.json()
            #expect(body[path: "account.id"] as? String == person.accountID)
            #expect(body[path: "account.status"] as? String == "disabled")
            #expect((body["account"] as? [String: Any])?.keys.contains("name") == true, "the body of GET /v1/accounts/{id}")
            #expect((body["identities"] as? [Any])?.count == 2)
            #expect(try await AccountRequests.status(setup, person.accountID) == "disabled")
            let audit = try await AccountRequests.accountAudit(setup)
            #expect(audit.map(\.action) == ["account.disabled"])
            #expect(audit.first?.actor == String((setup.keys["acme"] ?? "").prefix(12)), "the API key's prefix")
            #expect(audit.first?.target == person.accountID)

            // Sign-in: 403 account_disabled, through either identity.
            let apple = try await setup.post(
                "/v1/sign-in/apple",
                json: ["client_id": "com.acme.app", "identity_token": try L.appleToken(setup, subject: "001.disabled")])
            #expect(apple.status == .forbidden)
            #expect(apple.problemCode == "account_disabled")
            let google = try await setup.post("/v1/sign-in/google", json: ["id_token": try setup.googleToken(subject: "g-disabled")])
            #expect(google.problemCode == "account_disabled")
            // Refresh: invalid_grant; introspection: inactive, access and refresh tokens alike.
            for session in [person, viaGoogle] {
                let refreshed = try await AccountRequests.refresh(setup, session.refreshToken)
                #expect(refreshed.status == .badRequest)
                #expect(refreshed.problemCode == "invalid_grant")
                #expect(try await AccountRequests.introspect(setup, session.accessToken) == false)
                #expect(try await AccountRequests.introspect(setup, session.refreshToken) == false)
            }
            // Linking and unlinking: 403 account_disabled, nothing changed.
            let link = try await L.link(setup, account: person.accountID, token: person.accessToken, L.facebook(setup, user: "20301"))
            #expect(link.status == .forbidden, "\(String(buffer: link.body))")
            #expect(link.problemCode == "account_disabled")
            let unlink = try await L.unlink(setup, account: person.accountID, identity: googleIdentity, token: person.accessToken)
            #expect(unlink.status == .forbidden, "\(String(buffer: unlink.body))")
            #expect(unlink.problemCode == "account_disabled")
            #expect(try await L.identities(setup, of: person.accountID).count == 2)
            // Sessions ended in the same transaction, with the reason.
            let reasons = try await setup.app.database.client.query(
                """
                SELECT DISTINCT revoke_reason FROM sessions
                WHERE account_id = \(UUID(uuidString: person.accountID)) AND revoke_reason IS DISTINCT FROM 'link_proof'
                """)
            var found: [String?] = []
            for try await reason in reasons.decode(String?.self) { found.append(reason) }
            #expect(found == ["account_disabled"])
        }
    }

    @Test func enablingRestoresSignInButNotTheEndedSessions() async throws {
        try await L.run { setup in
            let person = try await L.signInWithApple(setup, subject: "001.enabled")
            #expect(try await AccountRequests.change(setup, person.accountID, "disable").status == .ok)
            let response = try await AccountRequests.change(setup, person.accountID, "enable")
            #expect(response.status == .ok, "\(String(buffer: response.body))")
            #expect(try response.json()[path: "account.status"] as? String == "active")
            #expect(try await AccountRequests.status(setup, person.accountID) == "active")
            #expect(try await AccountRequests.accountAudit(setup).map(\.action) == ["account.disabled", "account.enabled"])

            let again = try await L.signInWithApple(setup, subject: "001.enabled")
            #expect(again.accountID == person.accountID)
            #expect(try await AccountRequests.introspect(setup, again.accessToken) == true)
            #expect(try await AccountRequests.refresh(setup, again.refreshToken).status == .ok)
            // The session the disabling ended stays ended.
            #expect(try await AccountRequests.introspect(setup, person.accessToken) == false)
            #expect(try await AccountRequests.introspect(setup, person.refreshToken) == false)
            #expect(try await AccountRequests.refresh(setup, person.refreshToken).problemCode == "invalid_grant")
        }
    }

    @Test func disablingOrEnablingTwiceChangesNothing() async throws {
        try await L.run { setup in
            let person = try await L.signInWithApple(setup, subject: "001.twice")
            #expect(try await AccountRequests.change(setup, person.accountID, "enable").status == .ok, "enabling an active account")
            #expect(try await AccountRequests.change(setup, person.accountID, "disable").status == .ok)
            let second = try await AccountRequests.change(setup, person.accountID, "disable")
            #expect(second.status == .ok)
            #expect(try second.json()[path: "account.status"] as? String == "disabled")
            #expect(try await AccountRequests.accountAudit(setup).map(\.action) == ["account.disabled"])
            #expect(try await AccountRequests.change(setup, person.accountID, "enable").status == .ok)
            #expect(try await AccountRequests.change(setup, person.accountID, "enable").status == .ok)
            #expect(try await AccountRequests.accountAudit(setup).map(\.action) == ["account.disabled", "account.enabled"])
        }
    }

    /// A session that escaped the disabling's revocation (opened in a race with it, or an
    /// account disabled by SQL) is inactive all the same: the account's status is checked.
    @Test func aSessionThatEscapedTheDisablingIsInactive() async throws {
        try await L.run { setup in
            let person = try await L.signInWithApple(setup, subject: "001.escaped")
            let linked = try await L.link(
                setup, account: person.accountID, token: person.accessToken, try L.google(setup, subject: "g-escaped"))
            let googleIdentity = try #require(try linked.json()[path: "identity.id"] as? String)
            let id = try #require(UUID(uuidString: person.accountID))
            _ = try await setup.app.database.client.query(
                "UPDATE accounts SET status = 'disabled' WHERE tenant_id = \(setup.tenant.id) AND id = \(id)"
            ).collect()

            #expect(try await AccountRequests.introspect(setup, person.accessToken) == false)
            #expect(try await AccountRequests.introspect(setup, person.refreshToken) == false)
            #expect(try await AccountRequests.refresh(setup, person.refreshToken).problemCode == "invalid_grant")
            let link = try await L.link(setup, account: person.accountID, token: person.accessToken, L.facebook(setup, user: "20302"))
            #expect(link.problemCode == "account_disabled")
            let unlink = try await L.unlink(setup, account: person.accountID, identity: googleIdentity, token: person.accessToken)
            #expect(unlink.problemCode == "account_disabled")
            #expect(try await L.identities(setup, of: person.accountID).count == 2)

            // Enabling does not bring it back: a session from before the disabling never returns.
            #expect(try await AccountRequests.change(setup, person.accountID, "enable").status == .ok)
            #expect(try await AccountRequests.introspect(setup, person.accessToken) == false)
            #expect(try await AccountRequests.refresh(setup, person.refreshToken).problemCode == "invalid_grant")
        }
    }

    @Test func unknownAndForeignAccountsAreNotFound() async throws {
        try await L.run { setup in
            let bravo = try await L.signIn(
                setup, "google", ["id_token": try setup.googleToken(subject: "g-bravo-status", audience: S.bravoClient)], tenant: "bravo")
            for account in [UUID().uuidString, "not-a-uuid", bravo.accountID] {
                for action in ["disable", "enable"] {
                    let response = try await AccountRequests.change(setup, account, action)
                    #expect(response.status == .notFound, "\(account) \(action)")
                    #expect(response.problemCode == "account_not_found")
                    #expect(response.headers[.contentType] == "application/problem+json")
                }
            }
            #expect(
                try await L.signIn(
                    setup, "google", ["id_token": try setup.googleToken(subject: "g-bravo-status", audience: S.bravoClient)],
                    tenant: "bravo"
                ).accountID == bravo.accountID, "bravo's account is untouched")
            #expect(
                try await setup.app.database.auditLog.entries(tenantID: setup.tenant.id).filter { $0.action.hasPrefix("account.") }.isEmpty)
        }
    }

    @Test func theRoutesTakeAnAPIKeyWithTheAccountsScope() async throws {
        try await L.run { setup in
            let person = try await L.signInWithApple(setup, subject: "001.scope")
            let (_, sessionsOnly) = try await APIKeyAdmin(database: setup.app.database, actor: "test").create(
                tenant: "acme", name: "s", scopes: ["sessions"])
            for action in ["disable", "enable"] {
                #expect(
                    try await AccountRequests.change(setup, person.accountID, action, key: sessionsOnly).problemCode == "insufficient_scope"
                )
                let anonymous = try await setup.client.execute(uri: "/v1/accounts/\(person.accountID)/\(action)", method: .post)
                #expect(anonymous.status == .unauthorized)
                let get = try await setup.client.execute(
                    uri: "/v1/accounts/\(person.accountID)/\(action)", method: .get, headers: bearer(setup.keys["acme"] ?? ""))
                #expect(get.status == .methodNotAllowed)
            }
            #expect(try await AccountRequests.status(setup, person.accountID) == "active")
        }
    }
}

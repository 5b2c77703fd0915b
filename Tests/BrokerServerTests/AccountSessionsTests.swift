import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import PostgresNIO
import Storage
import Testing
import TestSupport

/// `GET /v1/accounts/{id}/sessions` and `DELETE /v1/accounts/{id}/sessions/{session_id}` (issue
/// 42 §3): the devices an account is signed in on, never a token, and one of them signed out:
/// its refresh family dead at once, audited, the others untouched.
@Suite struct AccountSessionsTests {
    typealias L = LinkingRequests

    static func sessions(_ setup: ProviderTestSetup, _ account: String, key: String? = nil) async throws -> TestResponse {
        try await setup.client.execute(
            uri: "/v1/accounts/\(account)/sessions", method: .get, headers: bearer(key ?? setup.keys["acme"] ?? ""))
    }

    static func end(_ setup: ProviderTestSetup, _ account: String, _ session: String, key: String? = nil) async throws -> TestResponse {
        try await setup.client.execute(
            uri: "/v1/accounts/\(account)/sessions/\(session)", method: .delete, headers: bearer(key ?? setup.keys["acme"] ?? ""))
    }

    static func listed(_ response: TestResponse) throws -> [[String: Any]] {
        try response.json()["sessions"] as? [[String: Any]] ?? []
    }

    @Test func theOpenSessionsAreListedAndOneIsEnded() async throws {
        try await L.run { setup in
            let phone = try await L.signInWithApple(setup, subject: "001.devices")
            let laptop = try await L.signInWithApple(setup, subject: "001.devices")
            #expect(phone.accountID == laptop.accountID)
            let refreshed = try await AccountRequests.refresh(setup, laptop.refreshToken)
            #expect(refreshed.status == .ok)
            let laptopRefresh = try #require(try refreshed.json()["refresh_token"] as? String)

            let response = try await Self.sessions(setup, phone.accountID)
            #expect(response.status == .ok, "\(String(buffer: response.body))")
            let sessions = try Self.listed(response)
            #expect(sessions.count == 2)
            #expect(sessions.allSatisfy { $0["provider"] as? String == "apple" && $0["client_id"] as? String == "com.acme.app" })
            // Newest first: the laptop, refreshed once.
            #expect(sessions.first?["last_used_at"] is String)
            #expect(sessions.count == 2 && sessions.last?["last_used_at"] == nil, "absent before the first refresh")
            let body = String(buffer: response.body)
            for token in [phone.accessToken, phone.refreshToken, laptop.accessToken, laptop.refreshToken, laptopRefresh] {
                #expect(!body.contains(token), "a token in the list")
            }
            let phoneSession = try #require(sessions.last?["id"] as? String)

            let ended = try await Self.end(setup, phone.accountID, phoneSession)
            #expect(ended.status == .ok, "\(String(buffer: ended.body))")
            #expect(try ended.json()["revoked"] as? Bool == true)
            #expect(
                try Self.listed(try await Self.sessions(setup, phone.accountID)).map { $0["id"] as? String } == [
                    sessions.first?["id"] as? String
                ])
            // The ended session is dead at once; the other still refreshes.
            let dead = try await AccountRequests.refresh(setup, phone.refreshToken)
            #expect(dead.status == .badRequest && dead.problemCode == "invalid_grant")
            #expect(try await AccountRequests.introspect(setup, phone.accessToken) == false)
            #expect(try await AccountRequests.refresh(setup, laptopRefresh).status == .ok)
            // Audited, naming the API key.
            let audit = try await setup.app.database.auditLog.entries(tenantID: setup.tenant.id).filter { $0.action == "session.revoked" }
            #expect(audit.map(\.target) == [phoneSession])
            #expect(audit.first?.actor.hasPrefix("ibk_") == true)

            // A second end, or an end through another account, is a 404 and ends nothing.
            let again = try await Self.end(setup, phone.accountID, phoneSession)
            #expect(again.status == .notFound && again.problemCode == "session_not_found")
            let other = try await L.signInWithApple(setup, subject: "001.other-person")
            let laptopSession = try #require(sessions.first?["id"] as? String)
            let crossed = try await Self.end(setup, other.accountID, laptopSession)
            #expect(crossed.status == .notFound && crossed.problemCode == "session_not_found")
            #expect(try Self.listed(try await Self.sessions(setup, phone.accountID)).count == 1, "the laptop's still open")
        }
    }

    @Test func anotherTenantAnUnknownAccountAndMalformedIdsAre404() async throws {
        try await L.run { setup in
            let person = try await L.signInWithApple(setup, subject: "001.walled")
            let session = try #require(try Self.listed(try await Self.sessions(setup, person.accountID)).first?["id"] as? String)
            // Tenant bravo's key sees no such account, and cannot end acme's session.
            let bravo = setup.keys["bravo"]
            let listed = try await Self.sessions(setup, person.accountID, key: bravo)
            #expect(listed.status == .notFound && listed.problemCode == "account_not_found")
            let ended = try await Self.end(setup, person.accountID, session, key: bravo)
            #expect(ended.status == .notFound && ended.problemCode == "account_not_found")
            #expect(try Self.listed(try await Self.sessions(setup, person.accountID)).count == 1, "still open")
            let unknown = UUID().uuidString.lowercased()
            #expect(try await Self.sessions(setup, unknown).problemCode == "account_not_found")
            #expect(try await Self.end(setup, unknown, session).problemCode == "account_not_found")
            #expect(try await Self.end(setup, person.accountID, "not-a-uuid").problemCode == "session_not_found")
            #expect(try await Self.end(setup, person.accountID, UUID().uuidString).problemCode == "session_not_found")
        }
    }

    /// A key without the `accounts` scope may neither list nor end sessions.
    @Test func theAccountsScopeIsRequired() async throws {
        try await L.run { setup in
            let person = try await L.signInWithApple(setup, subject: "001.scoped")
            let key = try await APIKeyAdmin(database: setup.app.database, actor: "test").create(
                tenant: "acme", name: "sessions-only", scopes: ["sessions"]
            ).key
            #expect(try await Self.sessions(setup, person.accountID, key: key).status == .forbidden)
            #expect(try await Self.end(setup, person.accountID, UUID().uuidString, key: key).status == .forbidden)
        }
    }
}

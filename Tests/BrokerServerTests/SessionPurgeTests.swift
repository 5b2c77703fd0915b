import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import PostgresNIO
import Storage
import Testing

@testable import BrokerApplication
@testable import BrokerServer

/// Issue 25: ended sessions and spent refresh tokens are purged in bounded batches, after their
/// latest start is folded into the identity's and account's stamps (decision 0013).
@Suite struct SessionPurgeTests {
    typealias S = ProviderTestSetup
    typealias L = LinkingRequests

    static func count(_ setup: S, _ table: String) async throws -> Int {
        let rows = try await setup.app.database.client.query(
            "SELECT count(*)::int8 FROM \(unescaped: table) WHERE tenant_id = \(setup.tenant.id)", logger: setup.app.database.logger)
        var total = 0
        for try await value in rows.decode(Int.self) { total = value }
        return total
    }

    static func account(_ setup: S, _ id: String) async throws -> [String: Any] {
        let response = try await setup.client.execute(uri: "/v1/accounts/\(id)", method: .get, headers: bearer(setup.keys["acme"] ?? ""))
        #expect(response.status == .ok)
        return try response.json()
    }

    @Test func endedSessionsGoAndTheStampsTheyCarriedStay() async throws {
        try await L.run { setup in
            let person = try await L.signInWithApple(setup, subject: "001.purged")
            let second = try await L.signInWithApple(setup, subject: "001.purged")
            let rotated = try await AccountRequests.refresh(setup, second.refreshToken)
            #expect(rotated.status == .ok)
            let before = try await Self.account(setup, person.accountID)
            let lastSeen = try #require(before[path: "account.last_seen_at"] as? String)
            let lastSignIn = try #require((before["identities"] as? [[String: Any]])?.first?["last_sign_in_at"] as? String)
            #expect(try await Self.count(setup, "sessions") == 2)
            #expect(try await Self.count(setup, "refresh_tokens") == 1, "the spent token of the rotation")

            // Nothing has ended yet: a pass today deletes nothing.
            let today = try await setup.app.database.sessionPurge.pass(batch: 1)
            #expect(today.sessions == 0 && today.refreshTokens == 0)

            // Revoked: gone once the grace has passed; the live session stays.
            let revoked = try await setup.post("/v1/sessions/revoke", json: ["token": person.refreshToken])
            #expect(revoked.status == .ok)
            let afterGrace = Date().addingTimeInterval(SessionPurge.grace + 60)
            let first = try await setup.app.database.sessionPurge.pass(now: afterGrace, batch: 1)
            #expect(first.sessions == 1)
            #expect(try await Self.count(setup, "sessions") == 1)

            // A live session's spent refresh token goes once past its own expiry (moved back here
            // instead of waiting for it); the session stays.
            try await setup.app.database.client.query(
                "UPDATE refresh_tokens SET expires_at = now() - interval '2 days' WHERE tenant_id = \(setup.tenant.id)",
                logger: setup.app.database.logger)
            let spent = try await setup.app.database.sessionPurge.pass(batch: 1)
            #expect(spent.sessions == 0 && spent.refreshTokens == 1)
            #expect(try await Self.count(setup, "sessions") == 1)

            // Far past every lifetime: all gone, in batches of one, and the stamps unchanged.
            let later = Date().addingTimeInterval(400 * 86_400)
            let all = try await setup.app.database.sessionPurge.pass(now: later, batch: 1)
            #expect(all.sessions == 1 && all.refreshTokens == 0)
            #expect(try await Self.count(setup, "sessions") == 0)
            #expect(try await Self.count(setup, "refresh_tokens") == 0)
            let after = try await Self.account(setup, person.accountID)
            #expect(after[path: "account.last_seen_at"] as? String == lastSeen)
            #expect((after["identities"] as? [[String: Any]])?.first?["last_sign_in_at"] as? String == lastSignIn)

            // The purged session's refresh token is refused as any unknown one.
            let refused = try await AccountRequests.refresh(setup, try #require(try rotated.json()["refresh_token"] as? String))
            #expect(refused.status == .badRequest)
            #expect(refused.problemCode == "invalid_grant")
        }
    }
}

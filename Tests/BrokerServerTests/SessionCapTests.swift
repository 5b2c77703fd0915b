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

/// Issue 25: an account has at most its tenant's `max_sessions_per_account` open sessions; a
/// sign-in past it revokes the oldest (reason `session_limit`), on the quiet path of returning
/// sign-ins and on the full one alike, and the revoked sessions' tokens stop working.
@Suite struct SessionCapTests {
    typealias S = ProviderTestSetup
    typealias L = LinkingRequests

    /// The account's sessions, oldest first: (revoked, reason).
    static func sessions(_ setup: S, _ account: String) async throws -> [(revoked: Bool, reason: String?)] {
        let rows = try await setup.app.database.client.query(
            """
            SELECT revoked_at IS NOT NULL, revoke_reason FROM sessions
            WHERE tenant_id = \(setup.tenant.id) AND account_id = \(try #require(UUID(uuidString: account)))
            ORDER BY created_at, id
            """, logger: setup.app.database.logger)
        var found: [(Bool, String?)] = []
        for try await row in rows.decode((Bool, String?).self) { found.append(row) }
        return found
    }

    @Test func theOldestOpenSessionsAreRevokedPastTheCap() async throws {
        try await L.run { setup in
            let tenant = try await TenantAdmin(database: setup.app.database, actor: "test").setMaxSessionsPerAccount("acme", 3)
            #expect(tenant.session.maxSessionsPerAccount == 3)
            // The cap reaches the serving instance through its cache invalidation.
            let seen = try await eventually {
                let info = try await setup.client.execute(uri: "/v1/tenant", method: .get, headers: bearer(setup.keys["acme"] ?? ""))
                return (try info.json()[path: "session.max_sessions_per_account"] as? Int) == 3
            }
            #expect(seen, "GET /v1/tenant shows the cap")

            // Three sign-ins: three open sessions.
            var signedIn: [L.SignedIn] = []
            for _ in 0..<3 { signedIn.append(try await L.signInWithApple(setup, subject: "001.capped")) }
            let account = signedIn[0].accountID
            #expect(try await Self.sessions(setup, account).allSatisfy { !$0.revoked })

            // A fourth (a returning sign-in that brings nothing new: the quiet path) revokes the first.
            signedIn.append(try await L.signInWithApple(setup, subject: "001.capped"))
            var sessions = try await Self.sessions(setup, account)
            #expect(sessions.map(\.revoked) == [true, false, false, false], "\(sessions)")
            #expect(sessions.first?.reason == "session_limit")

            // A fifth with a new email (the full statement) revokes the second.
            signedIn.append(try await L.signInWithApple(setup, subject: "001.capped", email: "moved@example.com"))
            sessions = try await Self.sessions(setup, account)
            #expect(sessions.map(\.revoked) == [true, true, false, false, false], "\(sessions)")
            #expect(sessions.filter(\.revoked).allSatisfy { $0.reason == "session_limit" })
            #expect(signedIn.allSatisfy { $0.accountID == account })

            // The revoked sessions' tokens stop working; the three newest keep theirs.
            for (index, session) in signedIn.enumerated() {
                let refreshed = try await AccountRequests.refresh(setup, session.refreshToken)
                if index < 2 {
                    #expect(refreshed.status == .badRequest && refreshed.problemCode == "invalid_grant", "session \(index)")
                } else {
                    #expect(refreshed.status == .ok, "session \(index): \(String(buffer: refreshed.body))")
                }
            }
            let introspected = try await setup.post("/v1/sessions/introspect", json: ["token": signedIn[0].accessToken])
            #expect(try introspected.json()["active"] as? Bool == false)

            // Another person's sessions are not touched by this account's cap.
            let other = try await L.signInWithApple(setup, subject: "001.other")
            #expect(try await Self.sessions(setup, other.accountID).map(\.revoked) == [false])
        }
    }

    @Test func theCapIsSetFromTheCLIRangeOnly() async throws {
        try await L.run { setup in
            let admin = TenantAdmin(database: setup.app.database, actor: "test")
            for refused in [0, 10_001] {
                await #expect(throws: BrokerError.self) { _ = try await admin.setMaxSessionsPerAccount("acme", refused) }
            }
            let unchanged = try await admin.find("acme")
            #expect(unchanged.session.maxSessionsPerAccount == 100, "the default, unchanged")
        }
    }
}

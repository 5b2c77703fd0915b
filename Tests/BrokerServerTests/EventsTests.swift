import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Storage
import Testing

/// The events outbox and `GET /v1/events` (issue 23 §5): events written with their changes,
/// read in commit order, paged by cursor, per tenant.
@Suite struct EventsTests {
    static func page(_ setup: AppleTestSetup, _ query: String = "", key: String? = nil) async throws -> TestResponse {
        try await setup.client.execute(uri: "/v1/events\(query)", method: .get, headers: bearer(key ?? setup.apiKey))
    }

    @Test func signInAndDeletionAreEventsPagedInOrder() async throws {
        try await AppleTestSetup.run { setup in
            let body = try await setup.signIn(["client_id": "com.acme.app", "identity_token": try setup.token(subject: "evented")])
            let account = try #require(body[path: "account.id"] as? String)
            // A returning sign-in is no event.
            _ = try await setup.signIn(["client_id": "com.acme.app", "identity_token": try setup.token(subject: "evented")])
            let deleted = try await setup.client.execute(uri: "/v1/accounts/\(account)", method: .delete, headers: bearer(setup.apiKey))
            #expect(deleted.status == .ok)

            // Visible once every transaction of the PostgreSQL cluster older than them finished
            // (the other suites' databases share it): polled, not assumed at once.
            let all = try await eventuallyValue { try await Self.page(setup).json() } until: {
                ($0["events"] as? [Any])?.count == 2
            }
            let events = all["events"] as? [[String: Any]] ?? []
            #expect(events.compactMap { $0["type"] as? String } == ["account.created", "account.deleted"])
            #expect(events.allSatisfy { $0["account_id"] as? String == account })
            #expect(events.first?[path: "data.provider"] as? String == "apple")
            #expect(events.last?[path: "data.reason"] as? String == "requested")
            #expect((events.first?["id"] as? String)?.hasPrefix("evt_") == true)
            #expect(all["next_cursor"] as? String == events.last?["cursor"] as? String)

            let first = try await Self.page(setup, "?limit=1").json()
            #expect((first["events"] as? [[String: Any]])?.compactMap { $0["type"] as? String } == ["account.created"])
            let cursor = try #require(first["next_cursor"] as? String)
            let second = try await Self.page(setup, "?after=\(cursor)&limit=1").json()
            #expect((second["events"] as? [[String: Any]])?.compactMap { $0["type"] as? String } == ["account.deleted"])
            let end = try #require(second["next_cursor"] as? String)
            let empty = try await Self.page(setup, "?after=\(end)").json()
            #expect((empty["events"] as? [Any])?.isEmpty == true)
            #expect(empty["next_cursor"] as? String == end, "an empty page gives the cursor back")
        }
    }

    @Test func anotherTenantSeesNoneAndBadQueriesAre400() async throws {
        try await AppleTestSetup.run { setup in
            _ = try await setup.signIn(["client_id": "com.acme.app", "identity_token": try setup.token(subject: "mine")])
            _ = try await setup.app.createTenant("globex")
            let globex = try await setup.app.createKey("globex")
            // acme's account.created is visible to acme first, then globex is asked.
            _ = try await eventuallyValue { try await Self.page(setup).json() } until: { ($0["events"] as? [Any])?.count == 1 }
            #expect((try await Self.page(setup, key: globex).json()["events"] as? [Any])?.isEmpty == true)
            for query in ["?after=abc", "?after=1", "?after=1.2.3", "?after=-1.5", "?limit=0", "?limit=1001", "?limit=x"] {
                let response = try await Self.page(setup, query)
                #expect(response.status == .badRequest, "\(query)")
                #expect(response.problemCode == "invalid_argument", "\(query)")
            }
            let sessionsOnly = try await APIKeyAdmin(database: setup.app.database, actor: "test").create(
                tenant: "acme", name: "s", scopes: ["sessions"])
            #expect(try await Self.page(setup, key: sessionsOnly.key).status == .forbidden)
        }
    }

    @Test func anEventOfATransactionStillRunningHoldsBackLaterOnesUntilItCommits() async throws {
        try await AppleTestSetup.run { setup in
            let database = setup.app.database
            let tenant = setup.tenant.id
            let (opened, release) = AsyncStream.makeStream(of: Void.self)
            let (committed, commit) = AsyncStream.makeStream(of: Void.self)
            // A writer that takes the lower id and commits last.
            let slow = Task {
                try await database.client.withTransaction(logger: database.logger) { connection in
                    try await connection.query(
                        "INSERT INTO events_outbox (tenant_id, event_type, payload) VALUES (\(tenant), 'test.slow', '{}')",
                        logger: database.logger)
                    release.yield()
                    for await _ in committed { break }
                }
            }
            for await _ in opened { break }
            try await database.client.query(
                "INSERT INTO events_outbox (tenant_id, event_type, payload) VALUES (\(tenant), 'test.fast', '{}')")
            let held = try await Self.page(setup).json()
            #expect((held["events"] as? [Any])?.isEmpty == true, "nothing after an event still being written")
            let cursor = try #require(held["next_cursor"] as? String)
            commit.yield()
            try await slow.value
            let both = try await eventuallyValue { try await Self.page(setup, "?after=\(cursor)").json() } until: {
                ($0["events"] as? [Any])?.count == 2
            }
            #expect((both["events"] as? [[String: Any]])?.compactMap { $0["type"] as? String } == ["test.slow", "test.fast"])
        }
    }
}

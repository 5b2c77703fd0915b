import BrokerCore
import Foundation
import PostgresNIO
import TestSupport
import Testing

@testable import Storage

/// The lean quiet statement and the hint that picks it: both statements take the quiet path
/// alike, and the hint only ever chooses which runs first.
@Suite struct QuietSignInTests {
    let statements = SignInFixtures()

    func key(_ tenantID: UUID) -> RecentSignIns.Key {
        .init(tenantID: tenantID, provider: "apple", providerScope: "TEAM000001", subject: "001234.quiet")
    }

    @Test func aSignedInIdentityMakesTheNextSignInTryTheLeanStatement() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("lean", in: database)
            let first = try #require(
                try await database.accounts.signIn(statements.request(tenantID: tenant.id, email: "a@example.com", givenName: "Ada")))
            #expect(database.recentSignIns.contains(key(tenant.id)))
            let version = try await statements.identityVersion(database)

            // The lean statement itself: one row, the stored account and identity, a session.
            let request = statements.request(tenantID: tenant.id, email: "a@example.com")
            let outcomes = try await AccountRepository.quietSignIns([request], client: database.client, logger: database.logger)
            var count = 0
            for case .opened(let result) in outcomes {
                let (account, identity) = (result.account, result.identity)
                #expect(account.id == first.account.id && account.name.givenName == "Ada")
                #expect(
                    identity.id == first.identity.id
                        && identity.lastSignInAt ?? .distantPast >= first.identity.lastSignInAt ?? .distantFuture)
                #expect(result.isNewAccount == false)
                count += 1
            }
            #expect(count == 1)
            #expect(try await statements.identityVersion(database) == version)
            #expect(try await statements.count("sessions", database) == 2)
            // Each session holds its refresh token; no refresh-token row is written per sign-in.
            #expect(try await statements.count("sessions WHERE refresh_token_hash IS NOT NULL", database) == 2)
            #expect(try await statements.count("refresh_tokens", database) == 0)
        }
    }

    @Test func theLeanStatementOpensNothingWhenTheSignInIsNotQuiet() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("lean-miss", in: database)
            let first = try #require(try await database.accounts.signIn(statements.request(tenantID: tenant.id, email: "a@example.com")))
            func lean(_ request: SignInRequest) async throws -> Int {
                let outcomes = try await AccountRepository.quietSignIns([request], client: database.client, logger: database.logger)
                var count = 0
                for case .opened in outcomes { count += 1 }
                return count
            }
            // A new email, a name not stored yet, a disabled account: no row, no session.
            #expect(try await lean(statements.request(tenantID: tenant.id, email: "b@example.com")) == 0)
            #expect(try await lean(statements.request(tenantID: tenant.id, email: "a@example.com", givenName: "Ada")) == 0)
            _ = try await database.client.query("UPDATE accounts SET status = 'disabled' WHERE id = \(first.account.id)")
            #expect(try await lean(statements.request(tenantID: tenant.id, email: "a@example.com")) == 0)
            #expect(try await statements.count("sessions", database) == 1)
            // An old stamp does not matter: the sign-in is quiet when nothing is new.
            _ = try await database.client.query("UPDATE accounts SET status = 'active' WHERE id = \(first.account.id)")
            _ = try await database.client.query(
                "UPDATE identities SET last_sign_in_at = now() - interval '30 days' WHERE subject = '001234.quiet'")
            #expect(try await lean(statements.request(tenantID: tenant.id, email: "a@example.com")) == 1)
            #expect(try await statements.count("sessions", database) == 2)
        }
    }

    /// With a hint that never fires, every sign-in runs the full statement: its own quiet path
    /// writes no identity row either.
    @Test func theFullStatementAloneTakesTheQuietPathToo() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("full-quiet", in: database)
            let accounts = AccountRepository(client: database.client, logger: database.logger, recentSignIns: RecentSignIns(capacity: 0))
            let first = try #require(try await accounts.signIn(statements.request(tenantID: tenant.id, email: "a@example.com")))
            let version = try await statements.identityVersion(database)
            let second = try #require(try await accounts.signIn(statements.request(tenantID: tenant.id, email: "a@example.com")))
            #expect(second.account.id == first.account.id && !second.isNewAccount)
            #expect(try await statements.identityVersion(database) == version)
            #expect(try await statements.count("sessions", database) == 2)
        }
    }

    @Test func recentSignInsIsBoundedByItsCapacity() {
        let hint = RecentSignIns(capacity: 2)
        let a = key(UUID()), b = key(UUID()), c = key(UUID()), d = key(UUID())
        hint.record(a)
        hint.record(a)
        #expect(hint.contains(a) && !hint.contains(b) && hint.count == 1)
        hint.record(b)
        // The newer generation is full: it becomes the older one, still read.
        hint.record(c)
        #expect(hint.contains(a) && hint.contains(b) && hint.contains(c) && hint.count == 3)
        // Full again: the generation holding a and b is dropped.
        hint.record(d)
        hint.record(a)
        #expect(hint.contains(a) && hint.contains(c) && hint.contains(d) && !hint.contains(b))
        #expect(hint.count <= 4)
        let none = RecentSignIns(capacity: 0)
        none.record(a)
        #expect(!none.contains(a) && none.count == 0)
    }
}

import BrokerCore
import Foundation
import PostgresNIO
import Storage
import TestSupport
import Testing

/// The one-statement sign-in: a returning sign-in that changes nothing writes only the
/// session (the quiet path), anything new is still applied, and stale stamps are refreshed.
@Suite struct SignInStatementTests {
    let fixtures = SignInFixtures()

    @Test func returningSignInWithNothingNewWritesOnlyTheSession() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("quiet", in: database)
            let first = try #require(
                try await database.accounts.signIn(fixtures.request(tenantID: tenant.id, email: "a@example.com", givenName: "Ada")))
            #expect(first.isNewAccount)
            let version = try await fixtures.identityVersion(database)

            // Same email, no name: nothing to change → no row rewritten; the stamps returned are
            // this sign-in's.
            let second = try #require(try await database.accounts.signIn(fixtures.request(tenantID: tenant.id, email: "a@example.com")))
            #expect(!second.isNewAccount && second.account.id == first.account.id)
            let firstStamp = try #require(first.identity.lastSignInAt)
            #expect(try #require(second.identity.lastSignInAt) >= firstStamp)
            #expect(second.account.lastSeenAt == second.identity.lastSignInAt)
            #expect(second.account.name.givenName == "Ada" && second.account.email == "a@example.com")
            #expect(try await fixtures.identityVersion(database) == version)
            #expect(try await fixtures.count("sessions", database) == 2)
            // Each session holds its refresh token; no refresh-token row is written per sign-in.
            #expect(try await fixtures.count("sessions WHERE refresh_token_hash IS NOT NULL", database) == 2)
            #expect(try await fixtures.count("refresh_tokens", database) == 0)

            // A changed email is applied at once, quiet or not.
            let third = try #require(try await database.accounts.signIn(fixtures.request(tenantID: tenant.id, email: "b@example.com")))
            #expect(third.account.email == "b@example.com" && third.identity.email == "b@example.com")
            #expect(try await fixtures.identityVersion(database) != version)

            // Nothing new after a long while: still no row rewritten. The identity's and the
            // account's last sign-in are read from the sessions.
            _ = try await database.client.query(
                "UPDATE identities SET last_sign_in_at = now() - interval '2 days' WHERE subject = '001234.quiet'")
            _ = try await database.client.query(
                "UPDATE sessions SET created_at = created_at - interval '2 days' WHERE tenant_id = \(tenant.id)")
            let stale = try await fixtures.identityVersion(database)
            let fourth = try #require(try await database.accounts.signIn(fixtures.request(tenantID: tenant.id, email: "b@example.com")))
            #expect(try await fixtures.identityVersion(database) == stale)
            let fourthStamp = try #require(fourth.identity.lastSignInAt)
            #expect(abs(fourthStamp.timeIntervalSinceNow) < 30)
            #expect(try await fixtures.count("sessions", database) == 4)
            let (account, identities) = try #require(try await database.accounts.find(tenantID: tenant.id, accountID: first.account.id))
            #expect(identities.count == 1)
            let found = try #require(identities.first?.lastSignInAt)
            #expect(abs(found.timeIntervalSince(fourthStamp)) < 0.001)
            #expect(account.lastSeenAt == identities.first?.lastSignInAt)
        }
    }

    @Test func theStoredStampCountsWhenItIsLaterThanEverySession() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("stamps", in: database)
            let first = try #require(try await database.accounts.signIn(fixtures.request(tenantID: tenant.id, email: "a@example.com")))
            // Sessions gone (a purge), the stamps written by the last sign-in that changed
            // something remain.
            _ = try await database.client.query("DELETE FROM sessions WHERE tenant_id = \(tenant.id)")
            let (account, identities) = try #require(try await database.accounts.find(tenantID: tenant.id, accountID: first.account.id))
            let stamp = try #require(first.identity.lastSignInAt)
            #expect(abs((identities.first?.lastSignInAt ?? .distantPast).timeIntervalSince(stamp)) < 0.001)
            #expect(abs((account.lastSeenAt ?? .distantPast).timeIntervalSince(stamp)) < 0.001)
        }
    }

    @Test func quietPathStillRefusesADisabledAccount() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("quiet-disabled", in: database)
            let first = try #require(try await database.accounts.signIn(fixtures.request(tenantID: tenant.id, email: "a@example.com")))
            _ = try await database.client.query("UPDATE accounts SET status = 'disabled' WHERE id = \(first.account.id)")
            #expect(try await database.accounts.signIn(fixtures.request(tenantID: tenant.id, email: "a@example.com")) == nil)
            #expect(try await fixtures.count("sessions", database) == 1)
        }
    }
}

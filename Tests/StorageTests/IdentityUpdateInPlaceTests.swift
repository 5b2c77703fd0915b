import BrokerCore
import Foundation
import PostgresNIO
import TestSupport
import Testing

@testable import Storage

/// A sign-in that keeps a provider's new refresh token updates its identity in place
/// (decision 0093). PostgreSQL writes an updated row as a heap-only tuple, with no new entry in
/// any index, only when no column an index names changes, a partial index's predicate
/// included. The sealed token is new at every sign-in that brings one (Apple's code sign-ins:
/// the web flow, a relying party's sign-in through Apple), so no index may name it. Until
/// migration 0035 the credential checks' partial index did, and every such sign-in wrote a new
/// entry into every index of `identities`.
@Suite struct IdentityUpdateInPlaceTests {
    let fixtures = SignInFixtures()

    /// The identity columns whose value a sign-in writes anew whenever it brings one: the column
    /// table's ``SignInColumns/Rule/replaceAlwaysNew``.
    static let alwaysNew = SignInColumns.identity.map(\.written).filter { $0.rule == .replaceAlwaysNew }.map(\.name)

    @Test func theWordMatchTellsAColumnFromOneThatContainsItsName() {
        #expect(HeapTuple.names("ON identities (x) WHERE (provider_refresh_token_sealed IS NOT NULL)", "provider_refresh_token_sealed"))
        #expect(!HeapTuple.names("ON identities (x) WHERE holds_provider_refresh_token", "provider_refresh_token"))
        #expect(!HeapTuple.names("ON identities (x) WHERE (provider_refresh_token_sealed_at IS NULL)", "provider_refresh_token_sealed"))
    }

    @Test func noIndexOfIdentitiesNamesAColumnASignInWritesAnewEachTime() async throws {
        try #require(Self.alwaysNew == ["provider_refresh_token_sealed"])
        try await TestDatabase.withFresh { database, _ in
            let indexes = try await HeapTuple.indexes(of: "identities", in: database)
            // The key, the account's two, the credential checks', the transfer's, the import's.
            #expect(indexes.count >= 7 && indexes.contains { $0.name == "identities_credential_check_idx" })
            #expect(HeapTuple.naming(Self.alwaysNew, in: indexes) == [], "so updating it is never in place")
        }
    }

    func storedToken(_ subject: String, _ database: Database) async throws -> (Data?, String?, Bool) {
        let rows = try await database.client.query(
            "SELECT provider_refresh_token_sealed, provider_token_client_id, holds_provider_refresh_token FROM identities WHERE subject = \(subject)"
        )
        var found: [(Data?, String?, Bool)] = []
        for try await row in rows.decode((Data?, String?, Bool).self) { found.append(row) }
        try #require(found.count == 1)
        return found[0]
    }

    @Test func aSignInThatKeepsANewRefreshTokenUpdatesTheIdentityInPlace() async throws {
        try await TestDatabase.withFresh { database, _ in
            try await database.client.query("CREATE EXTENSION IF NOT EXISTS pageinspect")
            let tenant = try await TestDatabase.createTenant("in-place", in: database)
            var first = fixtures.request(tenantID: tenant.id, subject: "person")
            first.sealedProviderRefreshToken = Data([1])
            _ = try #require(try await database.accounts.signIn(first))
            #expect(try await storedToken("person", database) == (Data([1]), "com.acme.app", true))
            // The two statements that write a returning identity: the full one and the known batch.
            for (n, path) in ["full statement", "known batch"].enumerated() {
                var again = fixtures.request(tenantID: tenant.id, subject: "person")
                again.sealedProviderRefreshToken = Data([UInt8(n + 2)])
                if n == 0 {
                    let rows = try await database.client.rows(
                        AccountRepository.SignInStatement(request: again, newIdentityID: .timeOrdered(), newAccountID: .timeOrdered()),
                        logger: database.logger)
                    try #require(rows.count == 1)
                } else {
                    let answers = try await AccountRepository.knownSignIns([again], client: database.client, logger: database.logger)
                    try #require(answers.count == 1 && answers[0] != nil)
                }
                #expect(try await storedToken("person", database) == (Data([UInt8(n + 2)]), "com.acme.app", true), "\(path)")
                #expect(
                    try await HeapTuple.isHeapOnly("identities", "subject", "person", in: database),
                    "the \(path) wrote the identity outside HOT")
            }
        }
    }

    @Test func theFlagFollowsTheTokenWhereverItIsWrittenOrDropped() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("flag", in: database)
            _ = try #require(try await database.accounts.signIn(fixtures.request(tenantID: tenant.id, subject: "plain")))
            #expect(try await storedToken("plain", database) == (nil, nil, false))
            var sealed = fixtures.request(tenantID: tenant.id, subject: "plain")
            sealed.sealedProviderRefreshToken = Data([7])
            _ = try #require(try await database.accounts.signIn(sealed))
            #expect(try await storedToken("plain", database) == (Data([7]), "com.acme.app", true))
            // A sign-in without a token keeps the stored one.
            _ = try #require(try await database.accounts.signIn(fixtures.request(tenantID: tenant.id, subject: "plain")))
            #expect(try await storedToken("plain", database) == (Data([7]), "com.acme.app", true))
            // Dropped (as a team transfer drops it): the flag goes with it.
            try await database.client.query(
                "UPDATE identities SET provider_refresh_token_sealed = NULL, provider_token_client_id = NULL WHERE subject = 'plain'")
            #expect(try await storedToken("plain", database) == (nil, nil, false))
        }
    }
}

import BrokerCore
import Foundation
import PostgresNIO
import TestSupport
import Testing

@testable import Storage

/// Sign-ins this process had not seen, written together (decision 0059): one statement opens
/// the session of each quiet returning element as the quiet statement would, creates the
/// account of each element that can only be a new person, and writes nothing for any other;
/// the full statement then gives those what it always gave them.
@Suite struct FirstSignInBatchTests {
    let fixtures = SignInFixtures()

    func request(
        tenantID: UUID, subject: String, email: String? = nil, sessionID: UUID = UUID(), autoLink: Bool = false
    ) -> SignInRequest {
        var request = fixtures.request(tenantID: tenantID, subject: subject, email: email, sessionID: sessionID)
        request.autoLinkByEmail = autoLink
        return request
    }

    func batch(_ requests: [SignInRequest], _ database: Database) async throws -> [FirstSignInOutcome] {
        try await AccountRepository.firstSignIns(requests, client: database.client, logger: database.logger)
    }

    static func describe(_ outcome: FirstSignInOutcome) -> String {
        switch outcome {
        case .created: "created"
        case .opened: "opened"
        case .known: "known"
        case .elsewhere: "elsewhere"
        case .replayed: "replayed"
        }
    }

    @Test func oneStatementCreatesEachNewPersonWithSessionAndEvent() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("first-batch", in: database)
            var requests = [
                request(tenantID: tenant.id, subject: "p1", email: "one@example.com"),
                request(tenantID: tenant.id, subject: "p2", email: nil),
                request(tenantID: tenant.id, subject: "p3", email: "three@example.com"),
            ]
            requests[0].identity.name = PersonName(givenName: "Ada", familyName: "Lovelace")
            requests[1].sealedProviderRefreshToken = Data([1, 2, 3, 4])
            requests[2].identity.attributes = ["tier": "gold"]
            let outcomes = try await batch(requests, database)
            #expect(outcomes.map(Self.describe) == ["created", "created", "created"])
            var accounts: Set<UUID> = []
            for (request, outcome) in zip(requests, outcomes) {
                guard case .created(let result) = outcome else { continue }
                accounts.insert(result.account.id)
                #expect(result.isNewAccount && result.linkedBy == nil && !result.possibleDuplicate)
                #expect(result.sessionID == request.session.id && result.identity.accountID == result.account.id)
                #expect(result.identity.subject == request.subject && result.identity.provider == "apple")
                #expect(result.identity.providerScope == "TEAM000001" && result.account.status == .active)
                #expect(result.account.email == request.email && result.identity.email == request.email)
                #expect(result.account.lastSeenAt != nil && result.identity.lastSignInAt != nil)
            }
            #expect(accounts.count == 3)
            if case .created(let ada) = outcomes[0] {
                #expect(ada.account.name == PersonName(givenName: "Ada", familyName: "Lovelace"))
            }
            if case .created(let sealed) = outcomes[1] { #expect(sealed.identity.hasProviderRefreshToken) }
            if case .created(let gold) = outcomes[2] { #expect(gold.identity.attributes == ["tier": "gold"]) }
            // As the full statement writes them: display name, the token's client, the session.
            #expect(try await fixtures.count("accounts WHERE display_name = 'Ada Lovelace'", database) == 1)
            #expect(
                try await fixtures.count(
                    "identities WHERE provider_token_client_id = 'com.acme.app' AND provider_refresh_token_sealed = '\\x01020304'", database
                )
                    == 1)
            for request in requests {
                #expect(
                    try await fixtures.count(
                        """
                        sessions WHERE id = '\(request.session.id.uuidString)' AND client_id = 'com.acme.app' AND platform = 'ios'
                            AND idp = 'apple' AND revoked_at IS NULL AND expires_at > now()
                        """, database) == 1)
            }
            // One `account.created` a person, naming the account, the identity and the provider.
            let events = try await database.client.query(
                """
                SELECT account_id, payload->>'account_id', payload->>'identity_id', payload->>'provider' FROM events_outbox
                WHERE tenant_id = \(tenant.id) AND event_type = 'account.created' ORDER BY id
                """)
            var announced: Set<UUID> = []
            for try await (account, named, identity, provider) in events.decode((UUID, String, String, String).self) {
                #expect(named == account.uuidString.lowercased() && provider == "apple" && !identity.isEmpty)
                announced.insert(account)
            }
            #expect(announced == accounts)
            #expect(try await fixtures.count("events_outbox", database) == 3)
        }
    }

    @Test func anElementThatMayBeMoreThanANewPersonWritesNothing() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("first-mixed", in: database)
            let other = try await TestDatabase.createTenant("first-other", in: database)
            let known = try #require(
                try await database.accounts.signIn(request(tenantID: tenant.id, subject: "known", email: "k@example.com")))
            let revoked = try #require(try await database.accounts.signIn(request(tenantID: tenant.id, subject: "revoked")))
            _ = try await database.client.query(
                """
                WITH gone AS (DELETE FROM identities WHERE id = \(revoked.identity.id))
                INSERT INTO consent_revocations (tenant_id, provider, provider_scope, subject, account_id)
                VALUES (\(tenant.id), 'apple', 'TEAM000001', 'revoked', \(revoked.account.id))
                """)
            let twice = request(tenantID: tenant.id, subject: "twice")
            var token = request(tenantID: tenant.id, subject: "known")
            token.sealedProviderRefreshToken = Data([9])
            let requests = [
                request(tenantID: tenant.id, subject: "known"),  // quiet: its session opened
                request(tenantID: tenant.id, subject: "known", email: "new@example.com"),  // brings a new email: not quiet
                token,  // a provider refresh token is never quiet
                request(tenantID: tenant.id, subject: "revoked"),  // consent renewed: the full statement re-links it
                request(tenantID: tenant.id, subject: "replay", sessionID: known.sessionID),  // a taken session id
                request(tenantID: tenant.id, subject: "unlinked", email: "k@example.com"),  // may not link: a new person
                request(tenantID: tenant.id, subject: "link", email: "K@example.com", autoLink: true),  // may link by email
                request(tenantID: tenant.id, subject: "same-1", email: "same@example.com"),
                request(tenantID: tenant.id, subject: "same-2", email: "SAME@example.com"),  // sees same-1 afterwards
                twice,
                request(tenantID: tenant.id, subject: "twice"),  // the same person's second token at once
                request(tenantID: tenant.id, subject: "again", sessionID: twice.session.id),  // one token posted twice
                request(tenantID: other.id, subject: "known", email: "same@example.com"),  // another tenant's: new there
            ]
            let before = try await fixtures.count("sessions", database)
            let outcomes = try await batch(requests, database)
            #expect(
                outcomes.map(Self.describe) == [
                    "opened", "known", "known", "elsewhere", "elsewhere", "created", "elsewhere", "created", "elsewhere", "created",
                    "elsewhere", "replayed", "created",
                ])
            if case .opened(let opened) = outcomes[0] {
                #expect(opened.account.id == known.account.id && !opened.isNewAccount && opened.sessionID == requests[0].session.id)
            }
            if case .created(let unlinked) = outcomes[5] { #expect(unlinked.possibleDuplicate) }
            if case .created(let elsewhere) = outcomes[12] { #expect(!elsewhere.possibleDuplicate) }
            // Only the quiet element and the four created people wrote anything.
            #expect(try await fixtures.count("sessions", database) == before + 5)
            #expect(try await fixtures.count("accounts", database) == 6)
            #expect(try await fixtures.count("consent_revocations", database) == 1)
            #expect(try await fixtures.count("events_outbox WHERE event_type = 'account.created'", database) == 6)
        }
    }

    @Test func aQuietElementKeepsTheSessionCap() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("first-cap", in: database)
            let first = try #require(try await database.accounts.signIn(request(tenantID: tenant.id, subject: "capped")))
            var again = request(tenantID: tenant.id, subject: "capped")
            again.maxOpenSessions = 1
            let outcomes = try await batch([again], database)
            #expect(outcomes.map(Self.describe) == ["opened"])
            #expect(
                try await fixtures.count(
                    "sessions WHERE id = '\(first.sessionID.uuidString)' AND revoke_reason = 'session_limit'", database) == 1)
            #expect(try await fixtures.count("sessions WHERE revoked_at IS NULL", database) == 1)
        }
    }

    /// Through the repository: whatever the lean statement leaves, the full statement answers as
    /// it did before (a link by email, a consent renewal, a duplicate email, a replay).
    @Test func signInsTheLeanStatementLeavesGetTheFullStatementsAnswers() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("first-full", in: database)
            let accounts = database.accounts
            let first = try #require(try await accounts.signIn(request(tenantID: tenant.id, subject: "a", email: "k@example.com")))
            #expect(first.isNewAccount)
            let linked = try #require(
                try await accounts.signIn(request(tenantID: tenant.id, subject: "b", email: "k@example.com", autoLink: true)))
            #expect(linked.account.id == first.account.id && linked.linkedBy == .verifiedEmail && !linked.isNewAccount)
            let duplicate = try #require(try await accounts.signIn(request(tenantID: tenant.id, subject: "c", email: "k@example.com")))
            #expect(duplicate.isNewAccount && duplicate.possibleDuplicate && duplicate.account.id != first.account.id)
            await #expect(throws: IdentityTokenReplayed.self) {
                _ = try await accounts.signIn(request(tenantID: tenant.id, subject: "d", sessionID: first.sessionID))
            }
            // Many first sign-ins at once, some of one person: one account a person.
            let people = (0..<24).map { "crowd-\($0 % 12)" }
            let results = try await withThrowingTaskGroup(of: SignInResult?.self) { group in
                for subject in people {
                    group.addTask { try await accounts.signIn(request(tenantID: tenant.id, subject: subject)) }
                }
                var results: [SignInResult] = []
                for try await result in group { if let result { results.append(result) } }
                return results
            }
            #expect(results.count == 24)
            #expect(Set(results.map(\.account.id)).count == 12)
            #expect(results.filter(\.isNewAccount).count == 12)
            #expect(try await fixtures.count("identities WHERE subject LIKE 'crowd-%'", database) == 12)
            #expect(try await fixtures.count("events_outbox WHERE event_type = 'account.created'", database) == 14)
        }
    }
}

import BrokerCore
import Foundation
import PostgresNIO
import TestSupport
import Testing

@testable import Storage

/// A stored identity's sign-in that brings something new, the first this process sees of it
/// (decision 0063): the lean statement writes what the full statement writes, row for row,
/// and writes nothing where it does not apply, leaving that to the full statement.
@Suite struct KnownSignInTests {
    let fixtures = SignInFixtures()

    /// One case: what is stored before (set after a first sign-in, as an import or an earlier
    /// sign-in leaves it) and what the token brings.
    struct Case: Sendable {
        let subject: String
        var stored: String = ""
        var email: String? = "a@example.com"
        var givenName: String? = nil
        var familyName: String? = nil
        var realUserStatus: Int? = nil
        var attributes: [String: String] = [:]
        var openSessions = 0
        var cap = 100
    }

    static let cases: [Case] = [
        // Imported: no real_user_status, no names; the token brings them.
        Case(
            subject: "imported",
            stored: "UPDATE identities SET real_user_status = NULL, given_name = NULL, family_name = NULL, last_sign_in_at = NULL",
            givenName: "Ada", familyName: "Lovelace", realUserStatus: 2),
        // The person's email changed at the provider.
        Case(subject: "new-email", email: "b@example.com", realUserStatus: 1),
        // No email in the token: the identity's stays, and the account takes it.
        Case(subject: "no-email", stored: "UPDATE accounts SET email = NULL", email: nil, realUserStatus: 2),
        // Attributes are merged; a posted one replaces the stored one.
        Case(
            subject: "attributes", stored: #"UPDATE identities SET attributes = '{"x": "1", "y": "0"}'"#,
            attributes: ["y": "2", "z": "3"]),
        // Names fill only what is empty, on the identity and on the account.
        Case(
            subject: "names", stored: "UPDATE identities SET given_name = 'Kept'; UPDATE accounts SET display_name = NULL",
            givenName: "Other", familyName: "Filled", realUserStatus: 2),
        // The cap closes the oldest open sessions.
        Case(subject: "capped", realUserStatus: 2, openSessions: 3, cap: 2),
    ]

    func request(_ tenantID: UUID, _ item: Case) -> SignInRequest {
        var request = fixtures.request(tenantID: tenantID, subject: item.subject, email: item.email)
        request.identity.name = PersonName(givenName: item.givenName, familyName: item.familyName)
        request.identity.realUserStatus = item.realUserStatus
        request.identity.attributes = item.attributes
        request.maxOpenSessions = item.cap
        return request
    }

    /// Enrolls each case's person in `tenantID` and leaves the stored state the case asks for.
    func prepare(_ tenantID: UUID, _ database: Database) async throws {
        for item in Self.cases {
            for _ in 0..<max(1, item.openSessions) {
                _ = try #require(try await database.accounts.signIn(fixtures.request(tenantID: tenantID, subject: item.subject)))
            }
            for statement in item.stored.split(separator: ";") {
                let target =
                    statement.contains("UPDATE identities")
                    ? "subject = '\(item.subject)'"
                    : """
                    id = (SELECT account_id FROM identities WHERE tenant_id = '\(tenantID.uuidString)' AND subject = '\(item.subject)')
                    """
                try await database.client.query(
                    PostgresQuery(unsafeSQL: "\(statement) WHERE tenant_id = '\(tenantID.uuidString)' AND \(target)"))
            }
        }
    }

    /// What a tenant's people look like, without ids and stamps: identity, account, sessions.
    static let snapshotColumns = [
        "i.subject", "i.email", "i.email_verified", "i.is_private_email", "i.given_name", "i.family_name", "i.real_user_status",
        "i.attributes", "i.provider_refresh_token_sealed IS NULL", "i.last_sign_in_at IS NULL", "a.email", "a.email_verified",
        "a.is_private_email", "a.given_name", "a.family_name", "a.display_name", "a.status", "a.disabled_reason",
        "(SELECT count(*) FROM sessions s WHERE s.identity_id = i.id AND s.revoked_at IS NULL)",
        "(SELECT string_agg(s.revoke_reason, ',') FROM sessions s WHERE s.identity_id = i.id)",
        "(SELECT count(*) FROM events_outbox e WHERE e.account_id = a.id)",
        "(SELECT count(*) FROM audit_log l WHERE l.tenant_id = i.tenant_id AND l.target = i.id::text)",
    ]

    func snapshot(_ tenantID: UUID, _ database: Database) async throws -> [String] {
        let columns = Self.snapshotColumns.map { "coalesce((\($0))::text, '-')" }.joined(separator: ", ")
        let rows = try await database.client.query(
            PostgresQuery(
                unsafeSQL: """
                    SELECT concat_ws(' | ', \(columns))
                    FROM identities i JOIN accounts a ON a.tenant_id = i.tenant_id AND a.id = i.account_id
                    WHERE i.tenant_id = '\(tenantID.uuidString)'
                    ORDER BY i.subject
                    """))
        var lines: [String] = []
        for try await line in rows.decode(String.self) { lines.append(line) }
        return lines
    }

    func lean(_ requests: [SignInRequest], _ database: Database) async throws -> [SignInResult?] {
        try await AccountRepository.knownSignIns(requests, client: database.client, logger: database.logger)
    }

    /// Every case through the full statement one by one on one tenant, and through the lean
    /// statement in one batch on another tenant prepared alike: the same rows.
    @Test func theLeanStatementWritesWhatTheFullStatementWrites() async throws {
        try await TestDatabase.withFresh { database, _ in
            let full = try await TestDatabase.createTenant("known-full", in: database)
            let lean = try await TestDatabase.createTenant("known-lean", in: database)
            try await prepare(full.id, database)
            try await prepare(lean.id, database)
            #expect(try await snapshot(full.id, database) == snapshot(lean.id, database))

            for item in Self.cases {
                let fullRows = try await database.client.rows(
                    AccountRepository.SignInStatement(request: request(full.id, item), newIdentityID: UUID(), newAccountID: UUID()),
                    logger: database.logger)
                #expect(fullRows.count == 1, "\(item.subject)")
            }
            let results = try await self.lean(Self.cases.map { request(lean.id, $0) }, database)
            #expect(results.allSatisfy { $0 != nil })
            for (item, result) in zip(Self.cases, results) {
                #expect(result?.identity.subject == item.subject && result?.isNewAccount == false)
            }
            let expected = try await snapshot(full.id, database)
            #expect(try await snapshot(lean.id, database) == expected)
            #expect(expected.count == Self.cases.count)
            // The cases did change something: the imported person has Apple's status and names,
            // the capped one two open sessions.
            #expect(expected.contains { $0.hasPrefix("imported | a@example.com | true | false | Ada | Lovelace | 2 |") })
            #expect(expected.contains { $0.hasPrefix("capped |") && $0.contains("| 2 | session_limit,session_limit |") })
        }
    }

    /// Where it does not apply it writes nothing and returns nil: an unknown identity, an
    /// account that is not active, a second element of an account or of an identity in the
    /// batch (the full statement follows for those). A taken session id fails the batch with
    /// nothing written.
    @Test func whereItDoesNotApplyItWritesNothing() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("known-none", in: database)
            let known = Case(subject: "known", realUserStatus: 2)
            let first = try #require(try await database.accounts.signIn(fixtures.request(tenantID: tenant.id, subject: "known")))
            let before = try await snapshot(tenant.id, database)

            try await database.client.query("UPDATE accounts SET status = 'disabled' WHERE id = \(first.account.id)")
            let none = try await lean([request(tenant.id, Case(subject: "nobody")), request(tenant.id, known)], database)
            #expect(none.allSatisfy { $0 == nil })
            try await database.client.query("UPDATE accounts SET status = 'active' WHERE id = \(first.account.id)")
            #expect(try await snapshot(tenant.id, database) == before)

            var replay = request(tenant.id, known)
            replay.session.id = first.sessionID
            await #expect(throws: PSQLError.self) { _ = try await lean([replay], database) }
            #expect(try await snapshot(tenant.id, database) == before)
            #expect(try await fixtures.count("identities WHERE real_user_status = 2", database) == 0)

            // One identity twice, and a second identity of the same account: the first only.
            try await database.client.query(
                """
                INSERT INTO identities (id, tenant_id, account_id, provider, provider_scope, subject, email, email_verified,
                    is_private_email)
                SELECT gen_random_uuid(), tenant_id, account_id, provider, provider_scope, 'linked', email, email_verified,
                    is_private_email
                FROM identities WHERE tenant_id = \(tenant.id) AND subject = 'known'
                """)
            let once = try await lean(
                [
                    request(tenant.id, known), request(tenant.id, Case(subject: "known", realUserStatus: 1)),
                    request(tenant.id, Case(subject: "linked", realUserStatus: 1)),
                ], database)
            #expect(once.map { $0 != nil } == [true, false, false])
            #expect(try await fixtures.count("identities WHERE real_user_status IS NOT NULL", database) == 1)
            #expect(try await fixtures.count("identities WHERE real_user_status = 2", database) == 1)
        }
    }

    /// Through the repository, by a process that has not seen the person: the first statement
    /// says `known`, the lean one signs in, a posted provider refresh token too (decision 0091);
    /// a replay and a disabled account get the full statement's answers.
    @Test func throughTheRepositoryAFreshProcessSignsAStoredIdentityIn() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("known-repo", in: database)
            let first = try #require(try await database.accounts.signIn(fixtures.request(tenantID: tenant.id, subject: "p")))
            let fresh = AccountRepository(client: database.client, logger: database.logger, recentSignIns: RecentSignIns())
            let item = Case(subject: "p", givenName: "Ada", realUserStatus: 2)

            let signedIn = try #require(try await fresh.signIn(request(tenant.id, item)))
            #expect(signedIn.account.id == first.account.id && !signedIn.isNewAccount && signedIn.linkedBy == nil)
            #expect(signedIn.identity.realUserStatus == 2 && signedIn.account.name.givenName == "Ada")
            #expect(!signedIn.possibleDuplicate)

            var replay = request(tenant.id, item)
            replay.session.id = signedIn.sessionID
            let other = AccountRepository(client: database.client, logger: database.logger, recentSignIns: RecentSignIns())
            await #expect(throws: IdentityTokenReplayed.self) { _ = try await other.signIn(replay) }

            var withToken = request(tenant.id, Case(subject: "p", realUserStatus: 1))
            withToken.sealedProviderRefreshToken = Data([1, 2, 3])
            let third = AccountRepository(client: database.client, logger: database.logger, recentSignIns: RecentSignIns())
            let refreshed = try #require(try await third.signIn(withToken))
            #expect(refreshed.identity.hasProviderRefreshToken && refreshed.identity.realUserStatus == 1)

            try await database.client.query("UPDATE accounts SET status = 'disabled' WHERE id = \(first.account.id)")
            let fourth = AccountRepository(client: database.client, logger: database.logger, recentSignIns: RecentSignIns())
            #expect(try await fourth.signIn(request(tenant.id, Case(subject: "p", realUserStatus: 2))) == nil)
            #expect(try await fixtures.count("sessions WHERE revoked_at IS NULL", database) == 3)
        }
    }
}

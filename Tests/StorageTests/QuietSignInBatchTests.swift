import BrokerCore
import Foundation
import PostgresNIO
import TestSupport
import Testing

@testable import Storage

/// Quiet sign-ins written together (decision 0030): one statement judges each element as the
/// single quiet statement would, opens the sessions of those that hold, and lets no element
/// decide another's outcome.
@Suite struct QuietSignInBatchTests {
    let fixtures = SignInFixtures()

    @Test func oneStatementOpensTheSessionOfEachElement() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("batch", in: database)
            let first = try await fixtures.enroll(["s1", "s2", "s3"], tenantID: tenant.id, database)
            let requests = ["s1", "s2", "s3"].map { fixtures.request(tenantID: tenant.id, subject: $0) }
            let outcomes = try await fixtures.batch(requests, database)
            #expect(outcomes.count == 3)
            for (request, outcome) in zip(requests, outcomes) {
                guard case .opened(let result) = outcome else {
                    Issue.record("\(request.subject): \(outcome)")
                    continue
                }
                let enrolled = try #require(first[request.subject])
                #expect(result.account.id == enrolled.account.id && result.identity.id == enrolled.identity.id)
                #expect(result.sessionID == request.session.id && !result.isNewAccount && result.linkedBy == nil)
            }
            // Each session as the single statement writes it.
            for request in requests {
                let rows = try await database.client.query(
                    """
                    SELECT account_id, identity_id, client_id, platform, idp, refresh_token_hash,
                        abs(extract(epoch FROM expires_at) - \(request.session.expiresAt.timeIntervalSince1970)) < 0.001,
                        abs(extract(epoch FROM refresh_token_expires_at) - \(request.session.refreshTokenExpiresAt.timeIntervalSince1970)) < 0.001
                    FROM sessions WHERE id = \(request.session.id) AND tenant_id = \(tenant.id)
                    """)
                var found = 0
                for try await (account, identity, client, platform, idp, hash, expiry, idle) in rows.decode(
                    (UUID, UUID, String, String?, String, Data, Bool, Bool).self)
                {
                    let enrolled = try #require(first[request.subject])
                    #expect(account == enrolled.account.id && identity == enrolled.identity.id)
                    #expect(client == "com.acme.app" && platform == "ios" && idp == "apple")
                    #expect(hash == request.session.refreshTokenHash && expiry && idle)
                    found += 1
                }
                #expect(found == 1)
            }
            #expect(try await fixtures.count("sessions", database) == 6)
        }
    }

    @Test func eachElementIsJudgedOnItsOwn() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("batch-mixed", in: database)
            let other = try await TestDatabase.createTenant("batch-other", in: database)
            let first = try await fixtures.enroll(["quiet", "new-email", "replayed", "disabled"], tenantID: tenant.id, database)
            let disabled = try #require(first["disabled"])
            _ = try await database.client.query("UPDATE accounts SET status = 'disabled' WHERE id = \(disabled.account.id)")
            let taken = try #require(first["replayed"]).sessionID
            let quiet = fixtures.request(tenantID: tenant.id, subject: "quiet")
            let requests = [
                quiet,
                // not quiet: the full statement follows
                fixtures.request(tenantID: tenant.id, subject: "new-email", email: "changed@example.com"),
                fixtures.request(tenantID: tenant.id, subject: "replayed", sessionID: taken),  // its session id is taken
                fixtures.request(tenantID: tenant.id, subject: "quiet", sessionID: quiet.session.id),  // one token posted twice at once
                fixtures.request(tenantID: other.id, subject: "quiet"),  // another tenant's subject: nothing of this tenant
                fixtures.request(tenantID: tenant.id, subject: "disabled"),
                fixtures.request(tenantID: tenant.id, subject: "unknown"),
            ]
            let outcomes = try await fixtures.batch(requests, database)
            let described = outcomes.map { outcome -> String in
                switch outcome {
                case .opened: "opened"
                case .notQuiet: "not quiet"
                case .replayed: "replayed"
                }
            }
            #expect(described == ["opened", "not quiet", "replayed", "replayed", "not quiet", "not quiet", "not quiet"])
            // One session more: the quiet element's; the others wrote nothing.
            #expect(try await fixtures.count("sessions", database) == 5)
            #expect(try await fixtures.count("sessions WHERE tenant_id = '\(other.id.uuidString)'", database) == 0)
        }
    }

    @Test func anElementPostgreSQLCannotStoreFailsAloneAndTheOthersOpenTheirSessions() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("batch-poison", in: database)
            _ = try await fixtures.enroll(["s1", "s2"], tenantID: tenant.id, database)
            // A NUL character: json_to_recordset refuses it (22P05), and so the whole statement.
            let requests = [
                fixtures.request(tenantID: tenant.id, subject: "s1"), fixtures.request(tenantID: tenant.id, subject: "s\u{0}x"),
                fixtures.request(tenantID: tenant.id, subject: "s2"),
            ]
            await #expect(throws: PSQLError.self) { _ = try await fixtures.batch(requests, database) }
            let results = try await BatchElements.failingAlone(requests) {
                try await AccountRepository.quietSignIns($0, client: database.client, logger: database.logger)
            }
            #expect(results.count == 3)
            for index in [0, 2] {
                guard case .success(.opened) = results[index] else {
                    Issue.record("element \(index): \(results[index])")
                    continue
                }
            }
            #expect(throws: PSQLError.self) { try results[1].get() }
            #expect(try await fixtures.count("sessions", database) == 4)
        }
    }

    @Test func concurrentReturningSignInsShareStatementsAndEachOpensItsOwnSession() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("batch-load", in: database)
            let subjects = (0..<48).map { "user\($0)" }
            let first = try await fixtures.enroll(subjects, tenantID: tenant.id, database)
            let batcher = try #require(database.quietSignIns)
            let before = batcher.totals
            let accounts = database.accounts
            let results = try await withThrowingTaskGroup(of: (String, SignInResult?).self) { group in
                for subject in subjects {
                    let request = fixtures.request(tenantID: tenant.id, subject: subject)
                    group.addTask { (subject, try await accounts.signIn(request)) }
                }
                var results: [String: SignInResult] = [:]
                for try await (subject, result) in group { results[subject] = result }
                return results
            }
            for subject in subjects {
                #expect(results[subject]?.account.id == first[subject]?.account.id)
            }
            #expect(Set(results.values.map(\.sessionID)).count == subjects.count)
            #expect(try await fixtures.count("sessions", database) == 2 * subjects.count)
            let after = batcher.totals
            #expect(after.inputs - before.inputs == subjects.count)
            // Fewer statements than sign-ins: callers that found both slots busy went together.
            #expect(after.batches - before.batches < subjects.count)
        }
    }
}

import BrokerCore
import Foundation
import PostgresNIO
import TestSupport
import Testing

@testable import Storage

/// Apple's consent revocations and account deletions written together (decision 0058): one
/// statement applies each element as the single statement of decision 0052 did, takes one
/// element per account (the identities left are counted in the statement's own snapshot), and
/// records each `jti` once.
@Suite struct UnlinkingNotificationBatchTests {
    let quiet = SignInFixtures()

    func strings(_ sql: PostgresQuery, _ database: Database) async throws -> [String] {
        try await quiet.strings(sql, database)
    }

    /// Moves `moved`'s identity and its sessions to `to`'s account (which then has two); the
    /// account `moved` leaves behind keeps no identity and is not looked at again.
    func move(_ moved: SignInResult, to: SignInResult, tenantID: UUID, _ database: Database) async throws {
        try await database.client.query(
            """
            WITH moved AS (
                UPDATE sessions SET account_id = \(to.account.id) WHERE tenant_id = \(tenantID) AND identity_id = \(moved.identity.id)
            )
            UPDATE identities SET account_id = \(to.account.id) WHERE tenant_id = \(tenantID) AND id = \(moved.identity.id)
            """)
    }

    @Test func oneStatementPerAccountAppliesEachElementOnceWithItsAccountsRemainingIdentities() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("consent", in: database)
            let enrolled = try await quiet.enroll(["a", "b", "c", "d"], tenantID: tenant.id, database)
            let a = try #require(enrolled["a"]), c = try #require(enrolled["c"])
            try await move(c, to: a, tenantID: tenant.id, database)
            let repeated = UUID().uuidString
            let elements = [
                NotificationElements.element("consent-revoked", "a", jti: repeated, tenantID: tenant.id),
                // Apple delivered it twice at once
                NotificationElements.element("consent-revoked", "a", jti: repeated, tenantID: tenant.id),
                NotificationElements.element("consent-revoked", "b", tenantID: tenant.id),
                NotificationElements.element("consent-revoked", "c", tenantID: tenant.id),  // a's account again: the next statement
                NotificationElements.element("consent-revoked", "nobody", tenantID: tenant.id),
                NotificationElements.element("consent-revoked", "d", tenantID: tenant.id),
            ]
            #expect(AppleNotificationElement.rounds(elements) == [[0, 2, 3, 4, 5], [1]])
            let first = ConsentRevocationStatement(elements: [0, 2, 3, 4, 5].map { elements[$0] })
            let results = try await TenantScope.tenant(tenant.id) {
                try await database.client.withScopedStatement(writes: true, logger: database.logger) { connection in
                    try await first.run(on: connection, logger: database.logger)
                }
            }
            #expect(results == [.done(.applied), .done(.applied), .deferred, .done(.unknownSubject), .done(.applied)])
            #expect(try await strings("SELECT subject FROM identities WHERE tenant_id = \(tenant.id)", database) == ["c"])
            // The deferred element wrote nothing, not even its receipt.
            #expect(try await strings("SELECT count(*)::text FROM notification_receipts WHERE tenant_id = \(tenant.id)", database) == ["4"])

            let outcomes = try await ConsentRevocationStatement.write(elements, client: database.client, logger: database.logger)
            #expect(outcomes == [.duplicate, .duplicate, .duplicate, .applied, .duplicate, .duplicate])
            #expect(try await strings("SELECT count(*)::text FROM identities WHERE tenant_id = \(tenant.id)", database) == ["0"])
            #expect(
                try await strings(
                    "SELECT count(*)::text FROM sessions WHERE tenant_id = \(tenant.id) AND revoked_at IS NULL", database) == ["0"])
            #expect(
                try await strings(
                    """
                    SELECT DISTINCT status || ' ' || coalesce(disabled_reason, '-') FROM accounts
                    WHERE tenant_id = \(tenant.id) AND id <> \(c.account.id)
                    """, database) == ["disabled consent_revoked"])
            // a's account kept c when a went, and was disabled when c went.
            let audited = try await strings(
                """
                SELECT target || ' ' || (details->>'remaining_identities') || ' ' || (details->>'account_disabled')
                FROM audit_log WHERE tenant_id = \(tenant.id) AND action = 'apple.consent_revoked' ORDER BY id
                """, database)
            #expect(
                audited == [
                    "\(a.identity.id.lowercasedString) 1 false", "\(try #require(enrolled["b"]).identity.id.lowercasedString) 0 true",
                    "\(try #require(enrolled["d"]).identity.id.lowercasedString) 0 true", "\(c.identity.id.lowercasedString) 0 true",
                ])
            #expect(
                try await strings(
                    "SELECT count(*)::text FROM audit_log WHERE tenant_id = \(tenant.id) AND action = 'apple.notification_unmatched'",
                    database)
                    == ["1"])
            // Each applied element's two events, in order.
            let events = try await strings(
                """
                SELECT event_type || ' ' || (payload->>'identity_id') FROM events_outbox
                WHERE tenant_id = \(tenant.id) AND event_type IN ('apple.consent_revoked', 'identity.unlinked') ORDER BY id
                """, database)
            #expect(
                events
                    == ["a", "b", "d", "c"].flatMap { subject -> [String] in
                        let id = enrolled[subject]?.identity.id.lowercasedString ?? "?"
                        return ["apple.consent_revoked \(id)", "identity.unlinked \(id)"]
                    })
            #expect(
                try await strings("SELECT count(*)::text FROM consent_revocations WHERE tenant_id = \(tenant.id)", database) == ["4"])

            // A later batch with every jti again changes nothing.
            let again = try await ConsentRevocationStatement.write(elements, client: database.client, logger: database.logger)
            #expect(again.allSatisfy { $0 == .duplicate })
            #expect(try await strings("SELECT count(*)::text FROM events_outbox WHERE event_type = 'identity.unlinked'", database) == ["4"])
        }
    }

    @Test func concurrentRevocationsShareStatementsAndEachGetsItsOwnOutcome() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("burst", in: database)
            let subjects = (0..<40).map { "p\($0)" }
            _ = try await quiet.enroll(subjects, tenantID: tenant.id, database)
            let batcher = ConsentRevocationStatement.batcher(
                pool: database.pool, logger: database.logger, maxRunning: 1, timeout: .seconds(30))
            let revocations = try #require(batcher)
            let outcomes = try await withThrowingTaskGroup(of: AppleNotificationRepository.Outcome.self) { group in
                for subject in subjects + ["stranger"] {
                    group.addTask {
                        try await revocations.run(NotificationElements.element("consent-revoked", subject, tenantID: tenant.id))
                    }
                }
                return try await group.reduce(into: [AppleNotificationRepository.Outcome]()) { $0.append($1) }
            }
            #expect(outcomes.filter { $0 == .applied }.count == 40)
            #expect(outcomes.filter { $0 == .unknownSubject }.count == 1)
            #expect(revocations.totals.inputs == 41)
            #expect(revocations.totals.batches < 41, "one slot: whoever arrives while a batch runs goes in the next")
            #expect(try await strings("SELECT count(*)::text FROM identities WHERE tenant_id = \(tenant.id)", database) == ["0"])
            #expect(
                try await strings("SELECT count(*)::text FROM accounts WHERE tenant_id = \(tenant.id) AND status = 'disabled'", database)
                    == ["40"])
        }
    }

    @Test func accountDeletionsTombstoneTheAccountTheyLeaveEmptyOneStatementPerAccount() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("deletes", in: database)
            let enrolled = try await quiet.enroll(["a", "b", "c"], tenantID: tenant.id, database)
            let a = try #require(enrolled["a"]), b = try #require(enrolled["b"]), c = try #require(enrolled["c"])
            try await move(c, to: a, tenantID: tenant.id, database)
            // Consent revocations remembered: a's own (forgotten with a), and an earlier one of b's
            // account under another subject (forgotten when b's account goes).
            try await database.client.query(
                """
                INSERT INTO consent_revocations (tenant_id, provider, provider_scope, subject, account_id)
                VALUES (\(tenant.id), 'apple', \(NotificationElements.team), 'a', \(a.account.id)), (\(tenant.id), 'apple', \(NotificationElements.team), 'earlier', \(b.account.id))
                """)
            let elements = ["a", "c", "b", "nobody"].map { NotificationElements.element("account-delete", $0, tenantID: tenant.id) }
            let outcomes = try await AccountDeleteNotificationStatement.write(elements, client: database.client, logger: database.logger)
            #expect(outcomes == [.applied, .applied, .applied, .unknownSubject])

            #expect(try await strings("SELECT count(*)::text FROM identities WHERE tenant_id = \(tenant.id)", database) == ["0"])
            #expect(try await strings("SELECT count(*)::text FROM consent_revocations WHERE tenant_id = \(tenant.id)", database) == ["0"])
            #expect(
                try await strings(
                    """
                    SELECT status || ' ' || deleted_reason || ' ' || (email IS NULL)::text FROM accounts
                    WHERE tenant_id = \(tenant.id) AND id IN (\(a.account.id), \(b.account.id)) ORDER BY id
                    """, database) == ["deleted apple_account_delete true", "deleted apple_account_delete true"])
            #expect(
                try await strings(
                    "SELECT DISTINCT revoke_reason FROM sessions WHERE tenant_id = \(tenant.id) AND account_id <> \(c.account.id)", database
                )
                    == ["apple_account_delete"])
            // a went first and left c; c's deletion took the account.
            let audited = try await strings(
                """
                SELECT action || ' ' || target || ' ' || coalesce(details->>'account_deleted', '-') || ' ' || (details->>'revoked_sessions')
                FROM audit_log WHERE tenant_id = \(tenant.id) AND action IN ('apple.account_deleted', 'account.deleted') ORDER BY id
                """, database)
            let (aID, bID, cID) = (a.identity.id.lowercasedString, b.identity.id.lowercasedString, c.identity.id.lowercasedString)
            #expect(
                audited == [
                    "apple.account_deleted \(aID) false 1", "account.deleted \(b.account.id.lowercasedString) - 1",
                    "apple.account_deleted \(bID) true 1", "account.deleted \(a.account.id.lowercasedString) - 1",
                    "apple.account_deleted \(cID) true 1",
                ])
            let events = try await strings(
                "SELECT event_type FROM events_outbox WHERE tenant_id = \(tenant.id) AND event_type <> 'account.created' ORDER BY id",
                database)
            #expect(
                events == [
                    "apple.account_deleted", "identity.unlinked",
                    "account.deleted", "apple.account_deleted", "identity.unlinked",
                    "account.deleted", "apple.account_deleted", "identity.unlinked",
                ])
            let again = try await AccountDeleteNotificationStatement.write(elements, client: database.client, logger: database.logger)
            #expect(again.allSatisfy { $0 == .duplicate })
        }
    }
}

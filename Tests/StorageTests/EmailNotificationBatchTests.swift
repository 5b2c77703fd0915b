import BrokerCore
import Foundation
import PostgresNIO
import TestSupport
import Testing

@testable import Storage

/// Apple's email notifications written together (decision 0046): one statement records each
/// element's receipt once, applies it to its identity in arrival order, and writes its audit row
/// and event exactly as a lone notification does.
@Suite struct EmailNotificationBatchTests {
    let quiet = SignInFixtures()

    @Test func oneStatementAppliesEachElementOnceAndInOrderPerIdentity() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("mail", in: database)
            let enrolled = try await quiet.enroll(["a", "b", "c"], tenantID: tenant.id, database)
            let repeated = UUID().uuidString
            let elements = [
                NotificationElements.element("email-disabled", "a", jti: repeated, tenantID: tenant.id),
                // Apple delivered it twice at once
                NotificationElements.element("email-disabled", "a", jti: repeated, tenantID: tenant.id),
                NotificationElements.element("email-disabled", "b", tenantID: tenant.id),
                NotificationElements.element("email-enabled", "b", tenantID: tenant.id),  // b's second event wins: it came last
                NotificationElements.element("email-disabled", "nobody", tenantID: tenant.id),
                NotificationElements.element("email-disabled", "c", tenantID: tenant.id),
            ]
            #expect(AppleNotificationElement.rounds(elements) == [[0, 2, 4, 5], [1, 3]])
            let outcomes = try await EmailNotificationBatchStatement.write(elements, client: database.client, logger: database.logger)
            #expect(outcomes == [.applied, .duplicate, .applied, .applied, .unknownSubject, .applied])

            let deliverable = try await quiet.strings(
                "SELECT subject || '=' || relay_email_deliverable::text FROM identities WHERE tenant_id = \(tenant.id) ORDER BY subject",
                database)
            #expect(deliverable == ["a=false", "b=true", "c=false"])
            #expect(
                try await quiet.strings("SELECT outcome FROM notification_receipts WHERE tenant_id = \(tenant.id) ORDER BY jti", database)
                    .sorted() == ["applied", "applied", "applied", "applied", "unknown_subject"])
            // The events in arrival order per identity, each naming its account and identity.
            let events = try await quiet.strings(
                """
                SELECT event_type || ' ' || (payload->>'account_id') || ' ' || (payload->>'identity_id') || ' ' || (payload->>'event_time')
                FROM events_outbox WHERE tenant_id = \(tenant.id) AND event_type LIKE 'apple.%' ORDER BY id
                """, database)
            func line(_ type: String, _ subject: String) throws -> String {
                let result = try #require(enrolled[subject])
                return "\(type) \(result.account.id.lowercasedString) \(result.identity.id.lowercasedString) 2026-11-18T11:06:40Z"
            }
            #expect(
                events == [
                    try line("apple.email_disabled", "a"), try line("apple.email_disabled", "b"), try line("apple.email_disabled", "c"),
                    try line("apple.email_enabled", "b"),
                ])
            let actions = try await database.auditLog.entries(tenantID: tenant.id).map(\.action).filter { $0.hasPrefix("apple.") }
            #expect(
                actions.sorted() == [
                    "apple.email_disabled", "apple.email_disabled", "apple.email_disabled", "apple.email_enabled",
                    "apple.notification_unmatched",
                ])

            // A later batch with every jti again changes nothing.
            let again = try await EmailNotificationBatchStatement.write(elements, client: database.client, logger: database.logger)
            #expect(again.allSatisfy { $0 == .duplicate })
            #expect(try await quiet.strings("SELECT count(*)::text FROM events_outbox WHERE event_type LIKE 'apple.%'", database) == ["4"])
        }
    }

    @Test func concurrentNotificationsShareStatementsAndEachGetsItsOwnOutcome() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("burst", in: database)
            let subjects = (0..<40).map { "p\($0)" }
            _ = try await quiet.enroll(subjects, tenantID: tenant.id, database)
            let batcher = EmailNotificationBatchStatement.batcher(
                pool: database.pool, logger: database.logger, maxRunning: 1, timeout: .seconds(30))
            let notifications = try #require(batcher)
            let outcomes = try await withThrowingTaskGroup(of: AppleNotificationRepository.Outcome.self) { group in
                for subject in subjects + ["stranger"] {
                    group.addTask {
                        try await notifications.run(NotificationElements.element("email-disabled", subject, tenantID: tenant.id))
                    }
                }
                return try await group.reduce(into: [AppleNotificationRepository.Outcome]()) { $0.append($1) }
            }
            #expect(outcomes.filter { $0 == .applied }.count == 40)
            #expect(outcomes.filter { $0 == .unknownSubject }.count == 1)
            #expect(notifications.totals.inputs == 41)
            #expect(notifications.totals.batches < 41, "one slot: whoever arrives while a batch runs goes in the next")
            #expect(
                try await quiet.strings(
                    "SELECT count(*)::text FROM identities WHERE tenant_id = \(tenant.id) AND NOT relay_email_deliverable", database)
                    == ["40"])
        }
    }
}

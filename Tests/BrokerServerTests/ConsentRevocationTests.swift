import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import MockIdP
import NIOFoundationCompat
import NIOCore
import PostgresNIO
import Storage
import Testing
import TestSupport

@testable import BrokerApplication
@testable import BrokerServer

/// Apple's `consent-revoked` in one statement (decision 0052), where the account keeps another
/// identity: only the Apple identity's sessions end, the account stays active, the audit row and
/// the events carry what happened, and a second delivery writes nothing.
@Suite struct ConsentRevocationTests {
    typealias S = ProviderTestSetup
    typealias L = LinkingRequests

    static func notify(_ setup: S, subject: String, jti: String) async throws -> TestResponse {
        let body = try setup.mocks.apple.notificationBody(audience: "com.acme.app", type: "consent-revoked", subject: subject, jti: jti)
        return try await setup.client.execute(
            uri: "/apple/notifications", method: .post, headers: [.contentType: "application/json"], body: ByteBuffer(data: body))
    }

    /// The JSON column of each row `sql` returns, as objects.
    static func objects(_ setup: S, _ sql: String) async throws -> [[String: Any]] {
        let rows = try await setup.app.database.client.query(PostgresQuery(unsafeSQL: sql), logger: setup.app.database.logger)
        var found: [[String: Any]] = []
        for try await text in rows.decode(String.self) {
            found.append((try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:])
        }
        return found
    }

    static func count(_ setup: S, _ sql: String) async throws -> Int {
        let rows = try await setup.app.database.client.query(PostgresQuery(unsafeSQL: sql), logger: setup.app.database.logger)
        var total = 0
        for try await value in rows.decode(Int.self) { total = value }
        return total
    }

    @Test func anAccountWithAnotherIdentityKeepsItAndItsSessions() async throws {
        try await L.run { setup in
            let person = try await L.signInWithApple(setup, subject: "001.two-ways")
            let linked = try await L.link(
                setup, account: person.accountID, token: person.accessToken, try L.google(setup, subject: "g-two-ways"))
            #expect(linked.status == .created)
            let viaGoogle = try await L.signIn(setup, "google", ["id_token": try setup.googleToken(subject: "g-two-ways")])
            #expect(viaGoogle.accountID == person.accountID)

            let jti = UUID().uuidString.lowercased()
            #expect(try await Self.notify(setup, subject: "001.two-ways", jti: jti).status == .ok)
            // The Apple session ended with the consent; the Google one lives; the account stays.
            #expect(try await AccountRequests.refresh(setup, person.refreshToken).problemCode == "invalid_grant")
            #expect(try await AccountRequests.refresh(setup, viaGoogle.refreshToken).status == .ok)
            #expect(try await AccountRequests.status(setup, person.accountID) == "active")
            let identities = try await L.identities(setup, of: person.accountID)
            #expect(identities.map { $0["provider"] as? String } == ["google"])
            #expect(try await Self.count(setup, "SELECT count(*)::int8 FROM sessions WHERE revoke_reason = 'consent_revoked'") == 1)
            #expect(try await Self.count(setup, "SELECT count(*)::int8 FROM consent_revocations WHERE subject = '001.two-ways'") == 1)

            let audit = try await Self.objects(
                setup, "SELECT details::text FROM audit_log WHERE action = 'apple.consent_revoked' ORDER BY id")
            #expect(audit.count == 1)
            #expect(audit.first?["account_id"] as? String == person.accountID)
            #expect(audit.first?["revoked_sessions"] as? Int == 1)
            #expect(audit.first?["remaining_identities"] as? Int == 1)
            #expect(audit.first?["account_disabled"] as? Bool == false)
            #expect(audit.first?["event_time"] is String)
            let events = try await Self.objects(
                setup,
                "SELECT (jsonb_build_object('type', event_type) || payload)::text FROM events_outbox WHERE event_type IN ('apple.consent_revoked', 'identity.unlinked') ORDER BY id"
            )
            #expect(events.map { $0["type"] as? String } == ["apple.consent_revoked", "identity.unlinked"])
            #expect(events.first?["revoked_sessions"] == nil, "the audit's, not the event's")
            #expect(events.first?["remaining_identities"] as? Int == 1)
            #expect(events.last?["reason"] as? String == "consent-revoked")
            #expect(events.last?["provider"] as? String == "apple")

            // Apple's second delivery of the same notification changes nothing.
            let before =
                try await Self.count(setup, "SELECT count(*)::int8 FROM audit_log")
                + Self.count(setup, "SELECT count(*)::int8 FROM events_outbox")
            #expect(try await Self.notify(setup, subject: "001.two-ways", jti: jti).status == .ok)
            let after =
                try await Self.count(setup, "SELECT count(*)::int8 FROM audit_log")
                + Self.count(setup, "SELECT count(*)::int8 FROM events_outbox")
            #expect(before == after)
            #expect(try await Self.count(setup, "SELECT count(*)::int8 FROM notification_receipts WHERE outcome = 'applied'") == 1)
        }
    }
}

import BrokerApplication
import BrokerCore
import Foundation
import MockIdP
import PostgresNIO
import Storage
import Testing

/// Apple credential-state checks (issue 23 §3) against MockIdP's refresh grant: a token Apple
/// still honours, one it revoked (handled as consent-revoked), Apple failing (never a
/// revocation), the spread of first checks over the interval, and the pacing all instances share.
@Suite struct AppleCredentialCheckTests {
    @Test func aTokenAppleRevokedIsHandledAsConsentRevokedAndTheOthersStay() async throws {
        try await AppleTestSetup.run { setup in
            var people: [(account: String, apple: String)] = []
            for subject in ["keeps.1", "keeps.2", "leaves"] {
                let person = try await AccountDeletion.signInWithCode(setup, subject: subject)
                people.append((person.account, person.apple))
            }
            let checker = CredentialChecks.checker(setup)
            let first = try await checker.checkTenant(setup.tenant.id, all: true)
            #expect(first == .init(checked: 3, valid: 3, revoked: 0, failed: 0))
            // Checked now: not due again for a day.
            #expect(try await checker.checkTenant(setup.tenant.id, all: false).checked == 0)

            setup.apple.revoke(token: people[2].apple)  // the person stopped using Sign in with Apple
            let second = try await checker.checkTenant(setup.tenant.id, all: true)
            #expect(second == .init(checked: 3, valid: 2, revoked: 1, failed: 0))
            #expect(try await CredentialChecks.count(setup, "SELECT count(*)::int8 FROM identities") == 2)
            let status = try await setup.app.database.accountStatuses.status(
                tenantID: setup.tenant.id, accountID: try #require(UUID(uuidString: people[2].account)))
            #expect(status == .disabled)
            #expect(
                try await CredentialChecks.count(
                    setup, "SELECT count(*)::int8 FROM events_outbox WHERE event_type = 'apple.consent_revoked'") == 1)
            #expect(try await CredentialChecks.count(setup, "SELECT count(*)::int8 FROM sessions WHERE revoked_at IS NULL") == 2)
        }
    }

    @Test func appleFailingIsRetriedLaterAndNeverTakenForARevocation() async throws {
        try await AppleTestSetup.run { setup in
            _ = try await AccountDeletion.signInWithCode(setup, subject: "steady.1")
            _ = try await AccountDeletion.signInWithCode(setup, subject: "steady.2")
            let checker = CredentialChecks.checker(setup)
            for fault in [
                MockAppleIdP.TokenFault.answer(status: 503, body: Data()),
                .answer(status: 400, body: Data(#"{"error":"invalid_client"}"#.utf8)),
            ] {
                setup.apple.tokenFault = fault
                let report = try await checker.checkTenant(setup.tenant.id, all: true)
                #expect(report == .init(checked: 2, valid: 0, revoked: 0, failed: 2))
                #expect(try await CredentialChecks.count(setup, "SELECT count(*)::int8 FROM identities") == 2)
                #expect(try await CredentialChecks.count(setup, "SELECT count(*)::int8 FROM sessions WHERE revoked_at IS NULL") == 2)
                // Tried again in about ten minutes, not a day.
                #expect(
                    try await CredentialChecks.count(
                        setup,
                        "SELECT count(*)::int8 FROM identities WHERE credential_check_due_at BETWEEN now() + interval '5 minutes' AND now() + interval '15 minutes'"
                    ) == 2)
            }
            setup.apple.tokenFault = .none
            #expect(try await checker.checkTenant(setup.tenant.id, all: true) == .init(checked: 2, valid: 2, revoked: 0, failed: 0))
        }
    }

    @Test func firstChecksAreSpreadOverTheInterval() async throws {
        try await AppleTestSetup.run { setup in
            for index in 0..<20 { _ = try await AccountDeletion.signInWithCode(setup, subject: "spread.\(index)") }
            #expect(try await setup.app.database.appleCredentials.schedule(interval: 86_400) == 20)
            #expect(try await setup.app.database.appleCredentials.schedule(interval: 86_400) == 0, "scheduled once")
            #expect(
                try await CredentialChecks.count(
                    setup,
                    "SELECT count(*)::int8 FROM identities WHERE credential_check_due_at BETWEEN now() - interval '1 minute' AND now() + interval '1 day'"
                ) == 20)
            // Twenty random points in a day: not all in its first hour (the chance is 20 in 10^27).
            #expect(
                try await CredentialChecks.count(
                    setup, "SELECT count(*)::int8 FROM identities WHERE credential_check_due_at > now() + interval '1 hour'") > 0)
        }
    }

    @Test func slotsAreSharedAndSpacedByTheRate() async throws {
        try await AppleTestSetup.run { setup in
            let repository = setup.app.database.appleCredentials
            _ = try await repository.takeSlot("test_pacing", rate: 10)  // creates the row
            // Two "instances" taking slots at once: ten slots, none shared, never closer than
            // 100 ms (a slot asked for after the next one passed starts when asked: later).
            async let one = (0..<5).asyncMap { _ in try await repository.takeSlot("test_pacing", rate: 10) }
            async let two = (0..<5).asyncMap { _ in try await repository.takeSlot("test_pacing", rate: 10) }
            let slots = (try await one + two).map(\.startsAt).sorted()
            #expect(slots.count == 10)
            for (earlier, later) in zip(slots, slots.dropFirst()) {
                #expect(later.timeIntervalSince(earlier) > 0.099, "\(later.timeIntervalSince(earlier))")
            }
        }
    }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var values: [T] = []
        for element in self { values.append(try await transform(element)) }
        return values
    }
}

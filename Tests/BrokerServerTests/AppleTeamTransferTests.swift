import BrokerApplication
import BrokerCore
import Crypto
import Foundation
import JWTKit
import MockIdP
import PostgresNIO
import Storage
import Synchronization
import Testing

/// Apple team transfer inside one tenant (issue 23 §4): export on the sending team, the group
/// moved, sign-ins of the window linked by `transfer_sub`, import on the receiving team, between
/// two of MockIdP's teams.
@Suite struct AppleTeamTransferTests {
    static let newTeam = "TEAM000002"

    /// Registers the receiving team with MockIdP and the tenant.
    static func addNewTeam(_ setup: AppleTestSetup) async throws {
        let p8 = P256.Signing.PrivateKey()
        setup.apple.registerTeam(newTeam, keyID: "KEY0000002", publicKey: p8.publicKey)
        _ = try await AppleAdmin(database: setup.app.database, actor: "test").setTeam(
            tenant: "acme", teamID: newTeam, keyID: "KEY0000002", p8PEM: p8.pemRepresentation, secrets: setup.app.secrets)
    }

    static func transfer(_ setup: AppleTestSetup) -> AppleTeamTransfer { setup.app.services.appleTeamTransfer(actor: "test") }

    static func export(_ setup: AppleTestSetup, skip: Set<String> = []) async throws
        -> (AppleTeamTransfer.ExportSummary, [AppleTeamTransfer.Line])
    {
        let written = Mutex<[AppleTeamTransfer.Line]>([])
        let summary = try await transfer(setup).export(
            tenant: setup.tenant, targetTeam: newTeam, sourceTeam: nil, skip: skip, maxPerSecond: 1_000,
            write: { line in written.withLock { $0.append(line) } }, progress: { _, _ in })
        return (summary, written.withLock { $0 })
    }

    static func identity(_ setup: AppleTestSetup, account: String) async throws -> (scope: String, subject: String, email: String?) {
        let rows = try await setup.app.database.client.query(
            "SELECT provider_scope, subject, email FROM identities WHERE account_id = \(UUID(uuidString: account)) AND provider = 'apple'"
        ).collect()
        return try #require(try rows.first?.decode((String, String, String?).self))
    }

    @Test func exportMoveWindowSignInAndImportKeepEveryAccount() async throws {
        try await AppleTestSetup.run { setup in
            var accounts: [String: String] = [:]
            for person in ["ann", "bob", "cy"] {
                let body = try await setup.signIn(["client_id": "com.acme.app", "identity_token": try setup.token(subject: person)])
                accounts[person] = try #require(body[path: "account.id"] as? String)
            }
            try await Self.addNewTeam(setup)

            // Sending side: one line per identity, never the old sub or an email.
            let (summary, lines) = try await Self.export(setup)
            #expect(summary.total == 3 && summary.exported == 3 && summary.failed.isEmpty)
            #expect(Set(lines.map(\.account_id)) == Set(accounts.values))
            #expect(lines.allSatisfy { $0.source_team == AppleTestSetup.teamID && $0.target_team == Self.newTeam })
            let text = String(describing: lines)
            #expect(!["ann", "bob", "cy", "person@example.com"].contains { text.contains("\"\($0)\"") || text.contains("sub: \($0)") })
            let ann = try #require(lines.first { $0.account_id == accounts["ann"] })
            #expect(ann.transfer_sub == MockAppleIdP.transferSubject(of: "ann", to: Self.newTeam))

            // Resumed with two lines in the file: the third comes from what the export kept,
            // without asking Apple again.
            let calls = setup.apple.migrationCalls
            let kept = Set(lines.prefix(2).map(\.identity_id))
            let (resumed, more) = try await Self.export(setup, skip: kept)
            #expect(resumed.skipped == 2 && resumed.exported == 1)
            #expect(more.map(\.identity_id) == lines.dropFirst(2).map(\.identity_id))
            #expect(setup.apple.migrationCalls == calls)

            // The app is transferred: its group moves onto the new team.
            try await AppleAdmin(database: setup.app.database, actor: "test").moveGroup(
                tenant: "acme", primaryAppID: "com.acme.app", teamID: Self.newTeam)

            // Ann signs in during the window: the new team's sub with her transfer_sub.
            let annNew = MockAppleIdP.subjectAfterTransfer("ann", to: Self.newTeam)
            let window = try await setup.signIn([
                "client_id": "com.acme.app",
                "identity_token": try setup.token(subject: annNew, extra: ["transfer_sub": .string(ann.transfer_sub)]),
            ])
            #expect(window[path: "account.id"] as? String == accounts["ann"], "linked by transfer_sub, no new account")
            #expect(window["is_new_account"] as? Bool == false)
            #expect(try await Self.identity(setup, account: try #require(accounts["ann"])).scope == Self.newTeam)

            // Receiving side: the others are re-keyed; Ann already was.
            let imported = try await Self.transfer(setup).importLines(
                tenant: setup.tenant, lines: lines, dryRun: false, maxPerSecond: 1_000, progress: { _, _ in })
            #expect(imported.rekeyed == 2 && imported.already == 1 && imported.notFound.isEmpty && imported.failed.isEmpty)
            let bob = try await Self.identity(setup, account: try #require(accounts["bob"]))
            #expect(bob.scope == Self.newTeam)
            #expect(bob.subject == MockAppleIdP.subjectAfterTransfer("bob", to: Self.newTeam))
            #expect(bob.email?.hasSuffix("@privaterelay.appleid.com") == true)
            let count = try await setup.app.database.client.query("SELECT count(*)::int8 FROM accounts").collect().first?.decode(Int.self)
            #expect(count == 3, "no account created")

            // Idempotent: again, nothing to do and nobody asked.
            let callsBefore = setup.apple.migrationCalls
            let again = try await Self.transfer(setup).importLines(
                tenant: setup.tenant, lines: lines, dryRun: false, maxPerSecond: 1_000, progress: { _, _ in })
            #expect(again.already == 3 && again.rekeyed == 0)
            let dry = try await Self.transfer(setup).importLines(
                tenant: setup.tenant, lines: lines, dryRun: true, maxPerSecond: 1_000, progress: { _, _ in })
            #expect(dry.already == 3 && dry.rekeyed == 0 && dry.notFound.isEmpty, "a dry run tells done lines from missing ones")
            #expect(setup.apple.migrationCalls == callsBefore)

            // Bob signs in with his new sub alone: his account.
            let bobBack = try await setup.signIn([
                "client_id": "com.acme.app",
                "identity_token": try setup.token(subject: MockAppleIdP.subjectAfterTransfer("bob", to: Self.newTeam)),
            ])
            #expect(bobBack[path: "account.id"] as? String == accounts["bob"])
            let audit = try await setup.app.database.auditLog.entries(tenantID: setup.tenant.id).map(\.action)
            #expect(audit.contains("apple.transfer.exported") && audit.contains("apple.transfer.imported"))
            #expect(audit.contains("apple.transfer.signed_in") && audit.contains("apple.group.moved"))
        }
    }

    @Test func appleFailingIsReportedAndTheImportRefusesAnUnconfiguredTeam() async throws {
        try await AppleTestSetup.run { setup in
            _ = try await setup.signIn(["client_id": "com.acme.app", "identity_token": try setup.token(subject: "dora")])
            // The target team is not configured: the export may still run (the target is another
            // team's), the import may not.
            setup.apple.migrationFault = 503
            let (failedRun, none) = try await Self.export(setup)
            #expect(failedRun.exported == 0 && failedRun.failed.map(\.error) == ["apple_unavailable"])
            #expect(none.isEmpty)
            setup.apple.migrationFault = nil
            let (retried, lines) = try await Self.export(setup)
            #expect(retried.exported == 1 && lines.count == 1)

            let refused = await #expect(throws: BrokerError.self) {
                try await Self.transfer(setup).importLines(
                    tenant: setup.tenant, lines: lines, dryRun: true, maxPerSecond: 1_000, progress: { _, _ in })
            }
            #expect(refused?.code == "apple_team_not_configured")

            // Configured, but the group is still on the old team: the import says to move it.
            try await Self.addNewTeam(setup)
            let unmoved = await #expect(throws: BrokerError.self) {
                try await Self.transfer(setup).importLines(
                    tenant: setup.tenant, lines: lines, dryRun: false, maxPerSecond: 1_000, progress: { _, _ in })
            }
            #expect(unmoved?.code == "apple_group_missing")
            #expect(unmoved?.hint?.contains("broker apple group move") == true)

            try await AppleAdmin(database: setup.app.database, actor: "test").moveGroup(
                tenant: "acme", primaryAppID: "com.acme.app", teamID: Self.newTeam)
            let dry = try await Self.transfer(setup).importLines(
                tenant: setup.tenant, lines: lines, dryRun: true, maxPerSecond: 1_000, progress: { _, _ in })
            #expect(dry.rekeyed == 1 && dry.dryRun)
            #expect(
                try await Self.identity(setup, account: lines[0].account_id).scope == AppleTestSetup.teamID, "a dry run changes nothing")
            setup.apple.migrationFault = 500
            let down = try await Self.transfer(setup).importLines(
                tenant: setup.tenant, lines: lines, dryRun: false, maxPerSecond: 1_000, progress: { _, _ in })
            #expect(down.failed.count == 1 && down.rekeyed == 0)
            setup.apple.migrationFault = nil
            let done = try await Self.transfer(setup).importLines(
                tenant: setup.tenant, lines: lines, dryRun: false, maxPerSecond: 1_000, progress: { _, _ in })
            #expect(done.rekeyed == 1)
        }
    }

    @Test func anExportedIdentityIsNotCredentialCheckedUntilReKeyed() async throws {
        try await AppleTestSetup.run { setup in
            let person = try await AccountDeletion.signInWithCode(setup, subject: "eve")
            _ = try await Self.export(setup)
            // Apple refuses the old team's token once the app moved: not a consent revoked.
            setup.apple.revoke(token: person.apple)
            let checker = setup.app.services.appleCredentialChecker(AppleCredentialChecks(interval: 86_400, maxCallsPerSecond: 1_000))
            let report = try await checker.checkTenant(setup.tenant.id, all: true)
            #expect(report.checked == 0 && report.revoked == 0)
            let linked = try await setup.app.database.client.query(
                "SELECT count(*)::int8 FROM identities WHERE account_id = \(UUID(uuidString: person.account))"
            ).collect().first?.decode(Int.self)
            #expect(linked == 1)
        }
    }

    @Test func aWindowSignInWithAnUnknownTransferSubIsANewPersonAsBefore() async throws {
        try await AppleTestSetup.run { setup in
            let body = try await setup.signIn([
                "client_id": "com.acme.app",
                "identity_token": try setup.token(subject: "stranger", extra: ["transfer_sub": .string("t.not-exported")]),
            ])
            #expect(body["is_new_account"] as? Bool == true)
        }
    }
}

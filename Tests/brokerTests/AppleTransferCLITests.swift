import Crypto
import Foundation
import MockIdP
import PostgresNIO
import Storage
import TestSupport
import Testing

/// `broker apple transfer export|import` and `broker apple group move` (issue 23 §4), as an
/// operator runs them against MockIdP's Apple.
@Suite struct AppleTransferCLITests {
    @Test func exportMoveAndImportThroughTheCLI() async throws {
        try await MockAppleServer.with { apple, baseURL in
            try await TestDatabase.withFresh { database, url in
                let cli = BrokerCLI(databaseURL: url, extra: ["BROKER_APPLE_BASE_URL": baseURL])
                let folder = NSTemporaryDirectory() + "transfer-\(UUID().uuidString.prefix(8))/"
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                defer { try? FileManager.default.removeItem(atPath: folder) }
                for team in ["TEAM000001", "TEAM000002"] {
                    try P256.Signing.PrivateKey().pemRepresentation.write(toFile: folder + team + ".p8", atomically: true, encoding: .utf8)
                }
                #expect(try await cli.run("tenant", "create", "acme").status == 0)
                #expect(
                    try await cli.run(
                        "apple", "team", "set", "--tenant", "acme", "--team-id", "TEAM000001", "--key-id", "KEY0000001",
                        "--private-key-file",
                        folder + "TEAM000001.p8"
                    ).status == 0)
                #expect(try await cli.run("apple", "group", "add", "--tenant", "acme", "--primary-app-id", "com.acme.app").status == 0)
                let (account, _) = try await CLIFixtures.seedAccount(database)
                #expect(
                    try await cli.run(
                        "apple", "team", "set", "--tenant", "acme", "--team-id", "TEAM000002", "--key-id", "KEY0000002",
                        "--private-key-file",
                        folder + "TEAM000002.p8"
                    ).status == 0)
                let ambiguous = try await cli.run("apple", "group", "add", "--tenant", "acme", "--primary-app-id", "com.acme.other")
                #expect(ambiguous.status == 1 && ambiguous.output.contains("--team-id"), "\(ambiguous.output)")

                let file = folder + "transfer.jsonl"
                let exported = try await cli.run(
                    "apple", "transfer", "export", "--tenant", "acme", "--target-team", "TEAM000002", "--out", file, "--json")
                #expect(exported.status == 0, "\(exported.output)")
                #expect(try exported.object()["exported"] as? Int == 1)
                let text = try String(contentsOfFile: file, encoding: .utf8)
                #expect(text.contains(account.uuidString.lowercased()) && text.contains("\"transfer_sub\""))
                #expect(!text.contains("001.cli") && !text.contains("ada@example.com"), "never the old sub or an email")
                let mode = try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int
                #expect(mode == 0o600)
                let twice = try await cli.run(
                    "apple", "transfer", "export", "--tenant", "acme", "--target-team", "TEAM000002", "--out", file)
                #expect(twice.status == 1 && twice.output.contains("--resume"), "\(twice.output)")
                let resumed = try await cli.run(
                    "apple", "transfer", "export", "--tenant", "acme", "--target-team", "TEAM000002", "--out", file, "--resume")
                #expect(resumed.status == 0 && resumed.output.contains("1 already in the file"), "\(resumed.output)")

                let early = try await cli.run("apple", "transfer", "import", "--tenant", "acme", "--in", file)
                #expect(early.status == 1 && early.output.contains("broker apple group move"), "\(early.output)")
                let moved = try await cli.run(
                    "apple", "group", "move", "--tenant", "acme", "--group", "com.acme.app", "--team-id", "TEAM000002")
                #expect(moved.status == 0, "\(moved.output)")
                let dry = try await cli.run("apple", "transfer", "import", "--tenant", "acme", "--in", file, "--dry-run", "--json")
                #expect(dry.status == 0, "\(dry.output)")
                #expect(try dry.object()["rekeyed"] as? Int == 1 && (try dry.object()["dry_run"] as? Bool) == true)
                let imported = try await cli.run("apple", "transfer", "import", "--tenant", "acme", "--in", file)
                #expect(imported.status == 0 && imported.output.contains("Re-keyed 1"), "\(imported.output)")
                let subject = try await database.client.query(
                    "SELECT provider_scope, subject FROM identities WHERE account_id = \(account)"
                ).collect().first?.decode((String, String).self)
                #expect(subject?.0 == "TEAM000002")
                #expect(subject?.1 == MockAppleIdP.subjectAfterTransfer("001.cli", to: "TEAM000002"))
                #expect(try String(contentsOfFile: file + ".progress", encoding: .utf8).hasPrefix("1"))
                let again = try await cli.run("apple", "transfer", "import", "--tenant", "acme", "--in", file, "--resume", "--json")
                #expect(try again.object()["skipped_by_resume"] as? Int == 1)

                try "not json\n".write(toFile: folder + "bad.jsonl", atomically: true, encoding: .utf8)
                let bad = try await cli.run("apple", "transfer", "import", "--tenant", "acme", "--in", folder + "bad.jsonl")
                #expect(bad.status == 1 && bad.output.contains("Line 1"), "\(bad.output)")
                _ = apple
            }
        }
    }
}

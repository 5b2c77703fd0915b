import BrokerCore
import Foundation
import PostgresNIO
import Storage
import TestSupport
import Testing

/// Operator text cannot forge output (issue 20 §8): control characters, line breaks and
/// bidirectional overrides are refused in every free-text option, naming it; and text output
/// escapes what it prints, so rows stored before the rule cannot forge it either.
@Suite struct FreeTextCLITests {
    static let forged = "Staff app\nacme      macos     compliant"
    static let clearScreen = "Staff app\u{1B}[2J\u{1B}[Hacme ios compliant"

    static func expectRefused(
        _ cli: BrokerCLI, _ arguments: [String], option: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let result = try cli.run(arguments)
        #expect(result.status == 1, "\(arguments): \(result.output)", sourceLocation: sourceLocation)
        #expect(result.output.contains("error: \(option) contains a control character"), "\(result.output)", sourceLocation: sourceLocation)
        #expect(result.output.contains("hint: "), "\(result.output)", sourceLocation: sourceLocation)
        #expect(!result.output.contains("\u{1B}"), "the refusal does not echo the escape", sourceLocation: sourceLocation)
        let json = try cli.run(arguments + ["--json"])
        #expect(json.status == 1, sourceLocation: sourceLocation)
        #expect(
            (try json.object()["error"] as? [String: Any])?["code"] as? String == "invalid_argument", "\(json.output)",
            sourceLocation: sourceLocation)
    }

    @Test func controlCharactersAreRefusedInEveryFreeTextOption() async throws {
        try await TestDatabase.withFresh { database, url in
            let cli = BrokerCLI(databaseURL: url)
            #expect(try await cli.run("tenant", "create", "acme").status == 0)
            let tenant = try #require(try await database.tenants.find(slug: "acme"))
            let exempt = ["policy", "exempt", "--tenant", "acme", "--reason", "education-enterprise", "--note"]
            for note in [Self.forged, Self.clearScreen, "Staff app \u{202E}ylno", "Staff\u{7F}", "Staff\u{85}app", "a\u{2028}b"] {
                try Self.expectRefused(cli, exempt + [note], option: "--note")
            }
            #expect(try await database.tenants.find(slug: "acme")?.policy.exemption == nil)

            try Self.expectRefused(cli, ["tenant", "create", "globex", "--name", "Globex\u{1B}[31m"], option: "--name")
            try Self.expectRefused(cli, ["tenant", "create", "globex", "--name", "Globex\nInc"], option: "--name")
            #expect(try await database.tenants.find(slug: "globex") == nil)
            try Self.expectRefused(cli, ["api-key", "create", "--tenant", "acme", "--name", "ci\nkey"], option: "--name")
            #expect(try await database.apiKeys.list(tenantID: tenant.id).isEmpty)
            try Self.expectRefused(
                cli,
                [
                    "provider", "enable", "google", "--tenant", "acme", "--client-id", "1-web.apps\u{1B}[2J.googleusercontent.com",
                    "--platforms", "web",
                ],
                option: "--client-id")
            #expect(try await database.providerConfigs.list(tenantID: tenant.id).isEmpty)

            // Plain text still passes (a trailing line break is trimmed, as before).
            let plain = try await cli.run(exempt + ["Staff app; existing company accounts only\n"])
            #expect(plain.status == 0, "\(plain.output)")
            #expect(try await database.tenants.find(slug: "acme")?.policy.exemption?.note == "Staff app; existing company accounts only")
        }
    }

    /// A note, a tenant name and a key name with a line break and escape codes, stored directly
    /// (as before the rule): every text output shows them escaped, on their own line.
    @Test func storedControlCharactersArePrintedEscaped() async throws {
        try await TestDatabase.withFresh { database, url in
            let cli = BrokerCLI(databaseURL: url)
            #expect(try await cli.run("tenant", "create", "acme").status == 0)
            #expect(try await cli.run("api-key", "create", "--tenant", "acme", "--name", "ci").status == 0)
            let note = Self.forged
            let name = "Acme\u{1B}[2J\nbravo     x"
            _ = try await database.client.query(
                """
                UPDATE tenants SET policy_exemption_reason = 'education-enterprise', policy_exemption_note = \(note),
                    policy_exempted_at = now(), display_name = \(name)
                WHERE slug = 'acme'
                """)
            _ = try await database.client.query("UPDATE api_keys SET name = \(name) WHERE name = 'ci'")
            // Offered on iOS, the platform stands by the exemption: `policy check` prints its note.
            let google = try await cli.run(
                "provider", "enable", "google", "--tenant", "acme", "--client-id", "1-ios.apps.googleusercontent.com", "--platforms", "ios")
            #expect(google.status == 0, "\(google.output)")

            let check = try await cli.run("policy", "check", "--tenant", "acme")
            #expect(check.status == 0, "\(check.output)")
            let lines = check.output.split(separator: "\n", omittingEmptySubsequences: false)
            #expect(!lines.contains { $0.hasPrefix("acme      macos") }, "no forged row: \(check.output)")
            #expect(check.output.contains("Staff app\\nacme      macos     compliant"), "\(check.output)")

            for arguments in [["tenant", "list"], ["tenant", "show", "acme"], ["api-key", "list", "--tenant", "acme"]] {
                let result = try await cli.run(arguments)
                #expect(result.status == 0, "\(arguments): \(result.output)")
                #expect(!result.output.contains("\u{1B}"), "\(arguments): \(result.output)")
                #expect(result.output.contains("Acme\\u{1B}[2J\\nbravo     x"), "\(arguments): \(result.output)")
                #expect(!result.output.split(separator: "\n").contains { $0.hasPrefix("bravo") }, "\(arguments): \(result.output)")
            }
            // JSON keeps the stored value as it is (JSON escapes it).
            let json = try await cli.run("tenant", "show", "acme", "--json")
            #expect(try json.object()["name"] as? String == name)
        }
    }
}

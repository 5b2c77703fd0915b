import Crypto
import Foundation
import Testing

/// What the guideline 4.8 CLI tests share (`PolicyCLITests`, `AttestationWithdrawalCLITests`):
/// tenants set up through the CLI, a refusal checked whole, the audit rows of forced changes.
public enum PolicyCLI {
    public static let attestFlags = ["--limits-data-to-name-email", "--private-email", "--no-ad-tracking"]

    public static func writeP8() throws -> String {
        let path = NSTemporaryDirectory() + "AuthKey_\(UUID().uuidString.prefix(6)).p8"
        try P256.Signing.PrivateKey().pemRepresentation.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Creates the tenant and, with `apple`, its team and a group whose primary App ID is
    /// `com.<slug>.app` (on `platforms`, default iOS).
    public static func tenant(_ slug: String, cli: BrokerCLI, apple: Bool = false, platforms: String? = nil) async throws {
        #expect(try await cli.run("tenant", "create", slug).status == 0)
        guard apple else { return }
        let p8 = try writeP8()
        defer { try? FileManager.default.removeItem(atPath: p8) }
        let team = try await cli.run(
            "apple", "team", "set", "--tenant", slug, "--team-id", "ABCDE12345", "--key-id", "KEY1234567", "--private-key-file", p8)
        #expect(team.status == 0, "\(team.output)")
        let group = try await cli.run(
            ["apple", "group", "add", "--tenant", slug, "--primary-app-id", "com.\(slug).app"]
                + (platforms.map { ["--platforms", $0] } ?? []))
        #expect(group.status == 0, "\(group.output)")
    }

    /// Expects a 4.8 refusal: exit 1, the guideline cited, a hint with `hintParts` and --force,
    /// and the JSON error code `login_policy_violation`.
    public static func expectRefused(
        _ cli: BrokerCLI, _ arguments: [String], mentions: [String], hintParts: [String], sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let result = try cli.run(arguments)
        #expect(result.status == 1, "\(arguments): \(result.output)", sourceLocation: sourceLocation)
        let error = result.output.split(separator: "\n").first { $0.hasPrefix("error: ") } ?? ""
        #expect(error.contains("App Store Review Guideline 4.8"), "\(result.output)", sourceLocation: sourceLocation)
        #expect(error.contains("Nothing was changed."), "\(result.output)", sourceLocation: sourceLocation)
        for part in mentions { #expect(error.contains(part), "\(part): \(result.output)", sourceLocation: sourceLocation) }
        let hint = result.output.split(separator: "\n").first { $0.hasPrefix("hint: ") } ?? ""
        #expect(hint.contains("--force"), "\(result.output)", sourceLocation: sourceLocation)
        for part in hintParts { #expect(hint.contains(part), "\(part): \(result.output)", sourceLocation: sourceLocation) }
        let json = try cli.run(arguments + ["--json"])
        #expect(json.status == 1, sourceLocation: sourceLocation)
        #expect(
            (try json.object()["error"] as? [String: Any])?["code"] as? String == "login_policy_violation", "\(json.output)",
            sourceLocation: sourceLocation)
    }

    public static func auditCount(_ cli: BrokerCLI, _ slug: String) throws -> Int {
        try cli.run("audit", "list", "--tenant", slug, "--limit", "1000", "--json").array().count
    }

    /// The tenant's `policy.violation_forced` rows, newest first.
    public static func forced(_ cli: BrokerCLI, _ slug: String) throws -> [[String: Any]] {
        try cli.run("audit", "list", "--tenant", slug, "--action", "policy.violation_forced", "--json").array()
    }
}

import BrokerCore
import Foundation
import Storage
import TestSupport
import Testing

/// A guideline 4.8 attestation ends with the configuration it was given for (issue 20 §7):
/// disabling the provider, or changing its app or client ids, hosted domain or login mode,
/// withdraws it in the same transaction (audited as `provider.attestation_withdrawn`), and the
/// guard judges the change without it. A change of platforms or of Facebook's app secret keeps it.
@Suite struct AttestationWithdrawalCLITests {
    static func secretFile(_ secret: String = "0123456789abcdef") throws -> String {
        let path = NSTemporaryDirectory() + "fb-\(UUID().uuidString.prefix(6))"
        try secret.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// `body` with a fresh database, the CLI on it, tenant `acme` (with Apple) and a Facebook app
    /// secret file.
    static func withAcme(_ body: @Sendable (Database, BrokerCLI, Tenant, _ secretFile: String) async throws -> Void) async throws {
        try await TestDatabase.withFresh { database, url in
            let cli = BrokerCLI(databaseURL: url)
            try await PolicyCLI.tenant("acme", cli: cli)
            let tenant = try #require(try await database.tenants.find(slug: "acme"))
            let secret = try Self.secretFile()
            defer { try? FileManager.default.removeItem(atPath: secret) }
            try await body(database, cli, tenant, secret)
        }
    }

    /// The tenant's `provider.attestation_withdrawn` rows, newest first.
    static func withdrawals(_ cli: BrokerCLI, _ slug: String) throws -> [[String: Any]] {
        try cli.run("audit", "list", "--tenant", slug, "--action", "provider.attestation_withdrawn", "--json").array()
    }

    /// The observed sequence: attest Facebook (app 55, Limited Login, android), disable it, enable
    /// it again as app 99, classic only, on ios and macos. The old attestation must not cover it.
    @Test func disablingAndReenablingAsAnotherAppNeedsForce() async throws {
        try await Self.withAcme { database, cli, tenant, secret in

            let attest = try await cli.run(
                ["provider", "attest", "--tenant", "acme", "--provider", "facebook"] + PolicyCLI.attestFlags)
            #expect(attest.status == 0, "\(attest.output)")
            let first = try await cli.run(
                "provider", "enable", "facebook", "--tenant", "acme", "--app-id", "55", "--app-secret-file", secret, "--limited-login",
                "--platforms", "android")
            #expect(first.status == 0, "\(first.output)")
            // A new app secret for the same app keeps the attestation.
            let otherSecret = try Self.secretFile("fedcba9876543210")
            defer { try? FileManager.default.removeItem(atPath: otherSecret) }
            let rotated = try await cli.run(
                "provider", "enable", "facebook", "--tenant", "acme", "--app-id", "55", "--app-secret-file", otherSecret, "--limited-login",
                "--platforms", "android")
            #expect(rotated.status == 0 && !rotated.output.contains("withdrawn"), "\(rotated.output)")
            #expect(try await database.loginPolicy.attestations(tenantID: tenant.id).map(\.provider) == [.facebook])

            // Disabling withdraws it, in the same change, and says so.
            let disabled = try await cli.run("provider", "disable", "facebook", "--tenant", "acme")
            #expect(disabled.status == 0, "\(disabled.output)")
            #expect(disabled.output.contains("note: the guideline 4.8 attestation of facebook"), "\(disabled.output)")
            #expect(disabled.output.contains("facebook was disabled"), "\(disabled.output)")
            #expect(try await database.loginPolicy.attestations(tenantID: tenant.id).isEmpty)
            let rows = try Self.withdrawals(cli, "acme")
            #expect(rows.count == 1)
            #expect(rows.first?["target"] as? String == "facebook")
            let details = try #require(rows.first?["details"] as? [String: Any])
            #expect(details["reason"] as? String == "provider_disabled")
            #expect((details["attested_by"] as? String)?.hasPrefix("cli:") == true, "\(details)")

            // Enabled again as another app, classic only, on iOS and macOS: judged as any other change.
            let again = [
                "provider", "enable", "facebook", "--tenant", "acme", "--app-id", "99", "--app-secret-file", secret, "--platforms",
                "ios,macos",
            ]
            try PolicyCLI.expectRefused(
                cli, again, mentions: ["facebook on ios", "facebook on macos"],
                hintParts: ["broker provider attest --tenant acme --provider facebook"])
            // The refusal leaves the disabled settings as they were (a disabled provider keeps them).
            let kept = try await database.providerConfigs.list(tenantID: tenant.id)
            #expect(kept.map(\.provider) == [.facebook])
            #expect(kept.first?.enabled == false)
            #expect(kept.first?.appID == "55")
            #expect(kept.first?.limitedLogin == true)
            let forced = try await cli.run(again + ["--force"])
            #expect(forced.status == 0, "\(forced.output)")
            let check = try await cli.run("policy", "check", "--tenant", "acme")
            #expect(check.status == 1, "\(check.output)")
            #expect(check.output.contains("violation"), "\(check.output)")
            #expect(try PolicyCLI.forced(cli, "acme").count == 1)
        }
    }

    /// Replacing the settings directly (no disable in between) withdraws the attestation in the
    /// change's own transaction: the change that newly violates is refused, and the refusal
    /// leaves both the settings and the attestation as they were.
    @Test func changingTheAppOrLoginModeInPlaceIsJudgedWithoutTheAttestation() async throws {
        try await Self.withAcme { database, cli, tenant, secret in
            #expect(
                try await cli.run(["provider", "attest", "--tenant", "acme", "--provider", "facebook"] + PolicyCLI.attestFlags).status
                    == 0)
            let enabled = try await cli.run(
                "provider", "enable", "facebook", "--tenant", "acme", "--app-id", "55", "--app-secret-file", secret, "--limited-login",
                "--platforms", "ios")
            #expect(enabled.status == 0, "\(enabled.output)")
            #expect(try await cli.run("policy", "check", "--tenant", "acme").status == 0)

            // Limited Login turned off: not the provider that was attested.
            try PolicyCLI.expectRefused(
                cli,
                [
                    "provider", "enable", "facebook", "--tenant", "acme", "--app-id", "55", "--app-secret-file", secret, "--platforms",
                    "ios",
                ],
                mentions: ["facebook on ios"], hintParts: [])
            // Another app.
            try PolicyCLI.expectRefused(
                cli,
                [
                    "provider", "enable", "facebook", "--tenant", "acme", "--app-id", "99", "--app-secret-file", secret, "--limited-login",
                    "--platforms", "ios",
                ], mentions: ["facebook on ios"], hintParts: [])
            let kept = try #require(try await database.providerConfigs.find(tenantID: tenant.id, provider: .facebook))
            #expect(kept.appID == "55" && kept.limitedLogin)
            #expect(try await database.loginPolicy.attestations(tenantID: tenant.id).map(\.provider) == [.facebook])
            #expect(try Self.withdrawals(cli, "acme").isEmpty)

            // Adding a platform keeps it: platforms are where the provider is offered, not how it works.
            let macos = try await cli.run(
                "provider", "enable", "facebook", "--tenant", "acme", "--app-id", "55", "--app-secret-file", secret, "--limited-login",
                "--platforms", "ios,macos,android")
            #expect(macos.status == 0 && !macos.output.contains("withdrawn"), "\(macos.output)")
            #expect(macos.output.contains("attested:      yes"), "\(macos.output)")
            #expect(try await cli.run("policy", "check", "--tenant", "acme").status == 0)

            // Forced: applied, withdrawn and audited with what changed.
            let forced = try await cli.run(
                "provider", "enable", "facebook", "--tenant", "acme", "--app-id", "99", "--app-secret-file", secret, "--platforms",
                "ios,macos,android", "--force")
            #expect(forced.status == 0, "\(forced.output)")
            #expect(forced.output.contains("its app id and limited login changed"), "\(forced.output)")
            #expect(try await database.loginPolicy.attestations(tenantID: tenant.id).isEmpty)
            let details = try #require(try Self.withdrawals(cli, "acme").first?["details"] as? [String: Any])
            #expect(details["reason"] as? String == "configuration_changed")
            #expect(details["changed"] as? [String] == ["app_id", "limited_login"])
            #expect(
                try PolicyCLI.forced(cli, "acme").first.flatMap { $0["details"] as? [String: Any] }?["violations"] as? [String]
                    == ["ios:facebook", "macos:facebook"])
        }
    }

    /// Google: another client id, or another hosted domain, withdraws the attestation; the same
    /// client ids in another order, or another list of platforms, keep it.
    @Test func aGoogleClientIDChangeWithdrawsTheAttestation() async throws {
        try await TestDatabase.withFresh { database, url in
            let cli = BrokerCLI(databaseURL: url)
            try await PolicyCLI.tenant("acme", cli: cli)
            let tenant = try #require(try await database.tenants.find(slug: "acme"))
            let (a, b, c) = ("1-ios.apps.googleusercontent.com", "1-web.apps.googleusercontent.com", "2-ios.apps.googleusercontent.com")
            #expect(
                try await cli.run(["provider", "attest", "--tenant", "acme", "--provider", "google"] + PolicyCLI.attestFlags).status
                    == 0)
            let enabled = try await cli.run(
                "provider", "enable", "google", "--tenant", "acme", "--client-id", a, "--client-id", b, "--platforms", "ios")
            #expect(enabled.status == 0, "\(enabled.output)")
            let reordered = try await cli.run(
                "provider", "enable", "google", "--tenant", "acme", "--client-id", b, "--client-id", a, "--platforms", "ios,macos,web")
            #expect(reordered.status == 0 && !reordered.output.contains("withdrawn"), "\(reordered.output)")
            #expect(try await cli.run("policy", "check", "--tenant", "acme").status == 0)

            let changed = [
                "provider", "enable", "google", "--tenant", "acme", "--client-id", c, "--client-id", b, "--platforms", "ios,macos,web",
            ]
            try PolicyCLI.expectRefused(cli, changed, mentions: ["google on ios", "google on macos"], hintParts: [])
            #expect(try await database.providerConfigs.find(tenantID: tenant.id, provider: .google)?.clientIDs == [b, a])
            #expect(try await database.loginPolicy.attestations(tenantID: tenant.id).map(\.provider) == [.google])
            let forced = try await cli.run(changed + ["--force"])
            #expect(forced.status == 0, "\(forced.output)")
            #expect(forced.output.contains("its client ids changed"), "\(forced.output)")
            #expect(try await database.loginPolicy.attestations(tenantID: tenant.id).isEmpty)
            #expect(
                try Self.withdrawals(cli, "acme").first.flatMap { $0["details"] as? [String: Any] }?["changed"] as? [String] == [
                    "client_ids"
                ])
            #expect(try await cli.run("policy", "check", "--tenant", "acme").status == 1)

            // A hosted domain is part of what was attested too; off the Apple platforms no
            // violation follows, but the attestation still ends.
            #expect(
                try await cli.run(["provider", "attest", "--tenant", "acme", "--provider", "google"] + PolicyCLI.attestFlags).status
                    == 0)
            let domain = try await cli.run(
                "provider", "enable", "google", "--tenant", "acme", "--client-id", c, "--client-id", b, "--hosted-domain", "example.com",
                "--platforms", "web")
            #expect(domain.status == 0, "\(domain.output)")
            #expect(domain.output.contains("its hosted domain changed"), "\(domain.output)")
            #expect(try await database.loginPolicy.attestations(tenantID: tenant.id).isEmpty)
            #expect(try Self.withdrawals(cli, "acme").count == 2)
        }
    }
}

import BrokerCore
import Crypto
import Foundation
import Storage
import TestSupport
import Testing

/// App Store Review Guideline 4.8 through the CLI (decision 0026): each change that breaks the
/// rule is refused with nothing changed and applied with `--force` (audited); attestations,
/// modes and exemptions; `broker policy check` and its exit status.
@Suite struct PolicyCLITests {
    @Test func enablingGoogleOrFacebookForApplePlatformsWithoutAQualifyingOptionIsRefused() async throws {
        try await TestDatabase.withFresh { database, url in
            let cli = BrokerCLI(databaseURL: url)
            try await PolicyCLI.tenant("acme", cli: cli)
            let tenant = try #require(try await database.tenants.find(slug: "acme"))
            let audit = try PolicyCLI.auditCount(cli, "acme")

            try PolicyCLI.expectRefused(
                cli,
                [
                    "provider", "enable", "google", "--tenant", "acme", "--client-id", "1-ios.apps.googleusercontent.com", "--platforms",
                    "ios",
                ],
                mentions: ["tenant 'acme'", "google on ios"],
                hintParts: [
                    "broker apple group add --tenant acme", "broker provider attest --tenant acme --provider google",
                    "broker policy exempt",
                ])
            // No --platforms: offered everywhere, macOS included.
            try PolicyCLI.expectRefused(
                cli, ["provider", "enable", "google", "--tenant", "acme", "--client-id", "1-web.apps.googleusercontent.com"],
                mentions: ["google on ios", "google on macos"], hintParts: ["ios:", "macos:"])
            let secret = NSTemporaryDirectory() + "fb-\(UUID().uuidString.prefix(6))"
            try "0123456789abcdef".write(toFile: secret, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(atPath: secret) }
            try PolicyCLI.expectRefused(
                cli,
                [
                    "provider", "enable", "facebook", "--tenant", "acme", "--app-id", "1234567890", "--app-secret-file", secret,
                    "--platforms", "macos",
                ],
                mentions: ["facebook on macos"], hintParts: ["broker provider attest --tenant acme --provider facebook"])
            #expect(try await database.providerConfigs.list(tenantID: tenant.id).isEmpty)
            #expect(try PolicyCLI.auditCount(cli, "acme") == audit)

            // Android and the web are not governed.
            let web = try await cli.run(
                "provider", "enable", "google", "--tenant", "acme", "--client-id", "1-web.apps.googleusercontent.com", "--platforms",
                "android,web")
            #expect(web.status == 0, "\(web.output)")

            // --force applies it and records the violation.
            let forced = try await cli.run(
                "provider", "enable", "facebook", "--tenant", "acme", "--app-id", "1234567890", "--app-secret-file", secret,
                "--platforms", "ios,android", "--force")
            #expect(forced.status == 0, "\(forced.output)")
            #expect(forced.output.contains("warning: tenant 'acme' violates App Store Review Guideline 4.8 on ios"), "\(forced.output)")
            #expect(try await database.providerConfigs.find(tenantID: tenant.id, provider: .facebook)?.platforms == [.ios, .android])
            let rows = try PolicyCLI.forced(cli, "acme")
            #expect(rows.count == 1)
            let details = try #require(rows.first?["details"] as? [String: Any])
            #expect(rows.first?["target"] as? String == "provider.enable")
            #expect(details["action"] as? String == "provider.enable")
            #expect(details["violations"] as? [String] == ["ios:facebook"])
            #expect((details["command"] as? String)?.contains("broker provider enable facebook --tenant acme") == true, "\(details)")

            // A tenant in violation can still make changes that add none.
            let unrelated = try await cli.run(
                "provider", "enable", "google", "--tenant", "acme", "--client-id", "2-web.apps.googleusercontent.com", "--platforms", "web")
            #expect(unrelated.status == 0, "\(unrelated.output)")
            // But not one that adds another.
            try PolicyCLI.expectRefused(
                cli,
                [
                    "provider", "enable", "google", "--tenant", "acme", "--client-id", "2-web.apps.googleusercontent.com", "--platforms",
                    "ios",
                ],
                mentions: ["google on ios"], hintParts: [])
            #expect(try PolicyCLI.forced(cli, "acme").count == 1)
            // Disabling what violates is never refused.
            #expect(try await cli.run("provider", "disable", "facebook", "--tenant", "acme").status == 0)
            #expect(try await cli.run("policy", "check", "--tenant", "acme").status == 0)
        }
    }

    @Test func appleClientPlatformsAndRemoval() async throws {
        try await TestDatabase.withFresh { database, url in
            let cli = BrokerCLI(databaseURL: url)
            try await PolicyCLI.tenant("acme", cli: cli, apple: true)
            let tenant = try #require(try await database.tenants.find(slug: "acme"))
            let mac = try await cli.run(
                "apple", "client", "add", "--tenant", "acme", "--group", "com.acme.app", "--client-id", "com.acme.mac", "--kind", "app",
                "--platforms", "macos")
            #expect(mac.status == 0, "\(mac.output)")
            #expect(mac.output.contains("(app on macos"), "\(mac.output)")
            let both = try await cli.run(
                "apple", "client", "add", "--tenant", "acme", "--group", "com.acme.app", "--client-id", "com.acme.both", "--kind", "app",
                "--platforms", "macos,ios", "--json")
            #expect(try both.object()["platforms"] as? [String] == ["ios", "macos"], "\(both.output)")
            #expect(
                try await cli.run(
                    "apple", "client", "add", "--tenant", "acme", "--group", "com.acme.app", "--client-id", "com.acme.web", "--kind",
                    "service",
                    "--redirect-uri", "https://acme.example.com/cb"
                ).status == 0)
            // Platforms outside the kind's: refused, nothing added.
            let bad: [([String], String)] = [
                (
                    ["--client-id", "com.acme.x", "--kind", "service", "--platforms", "ios"],
                    "A Services ID is offered on android and web only"
                ),
                (["--client-id", "com.acme.y", "--kind", "app", "--platforms", "web"], "An App ID is offered on ios and macos only"),
                (["--client-id", "com.acme.z", "--kind", "app", "--platforms", "tvos"], "is not a list of platforms"),
            ]
            for (arguments, message) in bad {
                let result = try await cli.run(["apple", "client", "add", "--tenant", "acme", "--group", "com.acme.app"] + arguments)
                #expect(result.status == 1 && result.output.contains(message), "\(arguments): \(result.output)")
            }
            let badGroup = try await cli.run(
                "apple", "group", "add", "--tenant", "acme", "--primary-app-id", "com.acme.other", "--platforms", "android")
            #expect(badGroup.status == 1 && badGroup.output.contains("An App ID is offered"), "\(badGroup.output)")
            // The CLI words what to pass (the domain names the rule, decision 0037).
            #expect(badGroup.output.contains("hint: A --kind app client takes --platforms"), "\(badGroup.output)")

            let shown = try await cli.run("apple", "show", "--tenant", "acme", "--json").object()
            let clients = try #require((shown["groups"] as? [[String: Any]])?.first?["clients"] as? [[String: Any]])
            func platforms(_ id: String) -> [String]? { clients.first { $0["client_id"] as? String == id }?["platforms"] as? [String] }
            #expect(platforms("com.acme.app") == ["ios"])
            #expect(platforms("com.acme.mac") == ["macos"])
            #expect(platforms("com.acme.both") == ["ios", "macos"])
            #expect(platforms("com.acme.web") == ["android", "web"])
            #expect(clients.count == 4)
            let text = try await cli.run("apple", "show", "--tenant", "acme")
            #expect(text.output.contains("com.acme.mac  platforms macos"), "\(text.output)")
            #expect(
                try await cli.run("provider", "show", "apple", "--tenant", "acme", "--json").object()["platforms"] as? [String] == [
                    "ios", "android", "web", "macos",
                ])

            // Google everywhere: Apple covers ios and macos.
            #expect(
                try await cli.run("provider", "enable", "google", "--tenant", "acme", "--client-id", "1-web.apps.googleusercontent.com")
                    .status == 0)
            #expect(try await cli.run("apple", "client", "remove", "--tenant", "acme", "--client-id", "com.acme.both").status == 0)
            let audit = try PolicyCLI.auditCount(cli, "acme")
            try PolicyCLI.expectRefused(
                cli, ["apple", "client", "remove", "--tenant", "acme", "--client-id", "com.acme.mac"],
                mentions: ["google on macos"], hintParts: ["broker apple client add --tenant acme", "--platforms macos"])
            // The primary App ID goes last.
            let primary = try await cli.run("apple", "client", "remove", "--tenant", "acme", "--client-id", "com.acme.app")
            #expect(primary.status == 1, "\(primary.output)")
            #expect(
                primary.output.contains("is the primary App ID of its group, which still has com.acme.mac, com.acme.web"),
                "\(primary.output)")
            #expect(primary.output.contains("hint: Remove those first (broker apple client remove --tenant acme --client-id com.acme.mac)"))
            let primaryJSON = try await cli.run("apple", "client", "remove", "--tenant", "acme", "--client-id", "com.acme.app", "--json")
            #expect((try primaryJSON.object()["error"] as? [String: Any])?["code"] as? String == "apple_primary_app_id")
            let unknown = try await cli.run("apple", "client", "remove", "--tenant", "acme", "--client-id", "com.nope")
            #expect(unknown.status == 1 && unknown.output.contains("has no Apple client 'com.nope'"), "\(unknown.output)")
            #expect(try await database.apple.clients(tenantID: tenant.id).count == 3)
            #expect(try PolicyCLI.auditCount(cli, "acme") == audit)

            // The web and Android are not governed: a Services ID goes freely.
            let web = try await cli.run("apple", "client", "remove", "--tenant", "acme", "--client-id", "com.acme.web", "--json")
            #expect(web.status == 0, "\(web.output)")
            #expect(try web.object()["group_removed"] as? Bool == false)
            // --force removes Apple's last macOS client, audited.
            let forced = try await cli.run("apple", "client", "remove", "--tenant", "acme", "--client-id", "com.acme.mac", "--force")
            #expect(forced.status == 0, "\(forced.output)")
            #expect(forced.output.contains("warning: tenant 'acme' violates App Store Review Guideline 4.8 on macos"), "\(forced.output)")
            let rows = try PolicyCLI.forced(cli, "acme")
            #expect(rows.count == 1)
            #expect((rows.first?["details"] as? [String: Any])?["violations"] as? [String] == ["macos:google"])
            #expect((rows.first?["details"] as? [String: Any])?["action"] as? String == "apple.client.remove")
            // The primary App ID, now alone, would take iOS's Sign in with Apple with it.
            try PolicyCLI.expectRefused(
                cli, ["apple", "client", "remove", "--tenant", "acme", "--client-id", "com.acme.app"],
                mentions: ["google on ios"], hintParts: ["broker apple group add --tenant acme"])
            #expect(try await cli.run("provider", "disable", "google", "--tenant", "acme").status == 0)
            let last = try await cli.run("apple", "client", "remove", "--tenant", "acme", "--client-id", "com.acme.app")
            #expect(last.status == 0, "\(last.output)")
            #expect(last.output.contains("the group was removed too"), "\(last.output)")
            #expect(try await database.apple.groups(tenantID: tenant.id).isEmpty)
            #expect(try await database.apple.clients(tenantID: tenant.id).isEmpty)
            let removals = try await cli.run("audit", "list", "--tenant", "acme", "--action", "apple.client.remove", "--json").array()
            #expect(removals.count == 4)
        }
    }

    @Test func attestationsAndModes() async throws {
        try await TestDatabase.withFresh { database, url in
            let cli = BrokerCLI(databaseURL: url)
            try await PolicyCLI.tenant("acme", cli: cli)
            let tenant = try #require(try await database.tenants.find(slug: "acme"))

            // All three criteria, and never Apple.
            let none = try await cli.run("provider", "attest", "--tenant", "acme", "--provider", "google")
            #expect(none.status == 1, "\(none.output)")
            #expect(none.output.contains("missing: --limits-data-to-name-email, --private-email, --no-ad-tracking"), "\(none.output)")
            #expect(none.output.contains("hint: ") && none.output.contains(PolicyCLI.attestFlags.joined(separator: " ")))
            let two = try await cli.run(
                "provider", "attest", "--tenant", "acme", "--provider", "facebook", "--private-email", "--no-ad-tracking")
            #expect(two.status == 1 && two.output.contains("missing: --limits-data-to-name-email."), "\(two.output)")
            let apple = try await cli.run(["provider", "attest", "--tenant", "acme", "--provider", "apple"] + PolicyCLI.attestFlags)
            #expect(apple.status == 1 && apple.output.contains("Sign in with Apple qualifies"), "\(apple.output)")
            // Any id may be attested before it is enabled (a tenant's own too); what is not an id is refused.
            let unknown = try await cli.run(["provider", "attest", "--tenant", "acme", "--provider", "git hub"] + PolicyCLI.attestFlags)
            #expect(unknown.status == 1 && unknown.output.contains("'git hub' is not a provider id"), "\(unknown.output)")
            let mixed = try await cli.run(
                ["provider", "attest", "--tenant", "acme", "--provider", "google", "--revoke"] + PolicyCLI.attestFlags)
            #expect(mixed.status == 1 && mixed.output.contains("--revoke takes none"))
            let noTenant = try await cli.run(["provider", "attest", "--tenant", "nobody", "--provider", "google"] + PolicyCLI.attestFlags)
            #expect(noTenant.status == 1 && noTenant.output.contains("There is no tenant 'nobody'"))
            #expect(try await database.loginPolicy.attestations(tenantID: tenant.id).isEmpty)

            // Before the provider is enabled.
            let attested = try await cli.run(
                ["provider", "attest", "--tenant", "acme", "--provider", "google", "--json"] + PolicyCLI.attestFlags)
            #expect(attested.status == 0, "\(attested.output)")
            #expect(try attested.object()["attested"] as? Bool == true)
            #expect((try attested.object()["attested_by"] as? String)?.hasPrefix("cli:") == true)
            let enabled = try await cli.run(
                "provider", "enable", "google", "--tenant", "acme", "--client-id", "1-ios.apps.googleusercontent.com", "--platforms", "ios",
                "--json")
            #expect(enabled.status == 0, "\(enabled.output)")
            #expect(try enabled.object()["attested"] as? Bool == true)
            #expect(try await cli.run("provider", "show", "google", "--tenant", "acme").output.contains("attested:      yes"))
            let secret = NSTemporaryDirectory() + "fb-\(UUID().uuidString.prefix(6))"
            try "0123456789abcdef".write(toFile: secret, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(atPath: secret) }
            let facebook = try await cli.run(
                "provider", "enable", "facebook", "--tenant", "acme", "--app-id", "1234567890", "--app-secret-file", secret, "--platforms",
                "ios")
            #expect(facebook.status == 0, "\(facebook.output)")
            let listed = try await cli.run("provider", "list", "--tenant", "acme", "--json").array()
            #expect(listed.first { $0["provider"] as? String == "facebook" }?["attested"] as? Bool == false)
            #expect(listed.first { $0["provider"] as? String == "apple" }?["attested"] is NSNull)

            // Withdrawing the attestation iOS relies on.
            let audit = try PolicyCLI.auditCount(cli, "acme")
            try PolicyCLI.expectRefused(
                cli, ["provider", "attest", "--tenant", "acme", "--provider", "google", "--revoke"],
                mentions: ["facebook and google on ios"], hintParts: ["broker apple group add --tenant acme"])
            // Switching to apple-required when only the attested Google covers iOS.
            try PolicyCLI.expectRefused(
                cli, ["policy", "set", "--tenant", "acme", "--mode", "apple-required"],
                mentions: ["facebook and google on ios", "Sign in with Apple (mode apple-required)"], hintParts: ["broker apple group add"])
            // Disabling the attested provider iOS relies on.
            try PolicyCLI.expectRefused(
                cli, ["provider", "disable", "google", "--tenant", "acme"], mentions: ["facebook on ios"], hintParts: [])
            #expect(try await database.loginPolicy.attestations(tenantID: tenant.id).map(\.provider) == [.google])
            #expect(try await database.tenants.find(slug: "acme")?.policy.mode == .privacyEquivalent)
            #expect(try await database.providerConfigs.list(tenantID: tenant.id).count == 2)
            #expect(try PolicyCLI.auditCount(cli, "acme") == audit)
            let badMode = try await cli.run("policy", "set", "--tenant", "acme", "--mode", "strict")
            #expect(badMode.status == 1 && badMode.output.contains("is not privacy-equivalent or apple-required"))

            // --force: applied and audited.
            let strict = try await cli.run("policy", "set", "--tenant", "acme", "--mode", "apple-required", "--force", "--json")
            #expect(strict.status == 0, "\(strict.output)")
            #expect(try strict.object()["mode"] as? String == "apple-required")
            #expect(try strict.object()["exemption"] is NSNull)
            #expect(try await database.tenants.find(slug: "acme")?.policy.mode == .appleRequired)
            var rows = try PolicyCLI.forced(cli, "acme")
            #expect(rows.count == 1)
            #expect((rows.first?["details"] as? [String: Any])?["violations"] as? [String] == ["ios:facebook", "ios:google"])
            #expect((rows.first?["details"] as? [String: Any])?["action"] as? String == "policy.mode.set")
            #expect(try await cli.run("policy", "check", "--tenant", "acme").status == 1)
            let back = try await cli.run("policy", "set", "--tenant", "acme", "--mode", "privacy-equivalent")
            #expect(back.status == 0 && back.output.contains("mode privacy-equivalent"), "\(back.output)")
            let revoked = try await cli.run("provider", "attest", "--tenant", "acme", "--provider", "google", "--revoke", "--force")
            #expect(revoked.status == 0, "\(revoked.output)")
            #expect(revoked.output.contains("is withdrawn"))
            #expect(try await database.loginPolicy.attestations(tenantID: tenant.id).isEmpty)
            rows = try PolicyCLI.forced(cli, "acme")
            #expect(rows.count == 2)
            #expect((rows.first?["details"] as? [String: Any])?["action"] as? String == "provider.attestation.revoke")
            let again = try await cli.run("provider", "attest", "--tenant", "acme", "--provider", "google", "--revoke")
            #expect(again.status == 1 && again.output.contains("has no attestation for google"), "\(again.output)")
            let actions = try await cli.run("audit", "list", "--tenant", "acme", "--limit", "100", "--json").array().compactMap {
                $0["action"] as? String
            }
            #expect(
                actions.contains("provider.attest") && actions.contains("provider.attestation.revoke")
                    && actions.contains("policy.mode.set"))
        }
    }

    @Test func exemptions() async throws {
        try await TestDatabase.withFresh { database, url in
            let cli = BrokerCLI(databaseURL: url)
            try await PolicyCLI.tenant("acme", cli: cli)
            let bad: [([String], String)] = [
                (["--reason", "own-accounts-only"], "An exemption needs a --note"),
                (["--reason", "because", "--note", "x"], "--reason 'because' is not one of the guideline's exemptions"),
                ([], "Give --reason and --note, or --clear."),
                (["--clear", "--reason", "government-id"], "--clear takes no --reason or --note."),
                (["--reason", "government-id", "--note", "x", "--force"], "--force goes with --clear only"),
                (["--reason", "government-id", "--note", String(repeating: "x", count: 1_001)], "--note is longer than 1000 characters."),
            ]
            for (arguments, message) in bad {
                let result = try await cli.run(["policy", "exempt", "--tenant", "acme"] + arguments)
                #expect(result.status == 1 && result.output.contains(message), "\(arguments): \(result.output)")
            }
            #expect(try await database.tenants.find(slug: "acme")?.policy.exemption == nil)

            let exempt = try await cli.run(
                "policy", "exempt", "--tenant", "acme", "--reason", "education-enterprise", "--note", "Staff app; company accounts only",
                "--json")
            #expect(exempt.status == 0, "\(exempt.output)")
            let exemption = try #require(try exempt.object()["exemption"] as? [String: Any])
            #expect(exemption["reason"] as? String == "education-enterprise")
            #expect(exemption["note"] as? String == "Staff app; company accounts only")
            #expect(exemption["since"] is String)
            #expect(
                try await cli.run("provider", "enable", "google", "--tenant", "acme", "--client-id", "1-ios.apps.googleusercontent.com")
                    .status == 0)
            let check = try await cli.run("policy", "check", "--tenant", "acme", "--json")
            #expect(check.status == 0, "\(check.output)")
            let reports = try check.array()
            #expect(reports.map { $0["status"] as? String } == ["exempt", "exempt"])
            #expect((reports.first?["exemption"] as? [String: Any])?["note"] as? String == "Staff app; company accounts only")
            let text = try await cli.run("policy", "check", "--tenant", "acme")
            #expect(text.status == 0)
            #expect(text.output.contains("acme ios: exempt (education-enterprise, since "), "\(text.output)")

            let audit = try PolicyCLI.auditCount(cli, "acme")
            try PolicyCLI.expectRefused(
                cli, ["policy", "exempt", "--tenant", "acme", "--clear"], mentions: ["google on ios", "google on macos"],
                hintParts: ["broker policy exempt --tenant acme --reason"])
            #expect(try await database.tenants.find(slug: "acme")?.policy.exemption?.reason == .educationEnterprise)
            #expect(try PolicyCLI.auditCount(cli, "acme") == audit)
            let cleared = try await cli.run("policy", "exempt", "--tenant", "acme", "--clear", "--force")
            #expect(cleared.status == 0, "\(cleared.output)")
            #expect(cleared.output.contains("no longer exempt"))
            #expect(try await database.tenants.find(slug: "acme")?.policy.exemption == nil)
            let rows = try PolicyCLI.forced(cli, "acme")
            #expect((rows.first?["details"] as? [String: Any])?["violations"] as? [String] == ["ios:google", "macos:google"])
            #expect((rows.first?["details"] as? [String: Any])?["action"] as? String == "policy.exemption.clear")
            let again = try await cli.run("policy", "exempt", "--tenant", "acme", "--clear")
            #expect(again.status == 1 && again.output.contains("has no guideline 4.8 exemption to clear"), "\(again.output)")
        }
    }

    @Test func policyCheckReportsEveryTenantAndPlatform() async throws {
        try await TestDatabase.withFresh { _, url in
            let cli = BrokerCLI(databaseURL: url)
            try await PolicyCLI.tenant("alpha", cli: cli, apple: true, platforms: "ios,macos")
            try await PolicyCLI.tenant("bravo", cli: cli)
            try await PolicyCLI.tenant("charlie", cli: cli)
            #expect(
                try await cli.run("provider", "enable", "google", "--tenant", "alpha", "--client-id", "1-web.apps.googleusercontent.com")
                    .status == 0)
            #expect(
                try await cli.run("policy", "exempt", "--tenant", "bravo", "--reason", "government-id", "--note", "Citizen ID only").status
                    == 0)
            #expect(
                try await cli.run("provider", "enable", "google", "--tenant", "bravo", "--client-id", "2-web.apps.googleusercontent.com")
                    .status == 0)

            // Compliant and exempt: exit 0.
            let fine = try await cli.run("policy", "check")
            #expect(fine.status == 0, "\(fine.output)")
            #expect(fine.output.contains("TENANT") && fine.output.contains("NOT QUALIFYING"))
            let alphaLine = fine.output.split(separator: "\n").first { $0.hasPrefix("alpha") && $0.contains("ios") }
            #expect(alphaLine?.contains("compliant") == true && alphaLine?.contains("apple") == true, "\(fine.output)")

            #expect(
                try await cli.run(
                    "provider", "enable", "google", "--tenant", "charlie", "--client-id", "3-ios.apps.googleusercontent.com", "--platforms",
                    "ios",
                    "--force"
                ).status == 0)
            let json = try await cli.run("policy", "check", "--json")
            #expect(json.status == 1, "\(json.output)")
            let reports = try json.array()
            #expect(
                reports.map { "\($0["tenant"] as? String ?? "?")/\($0["platform"] as? String ?? "?")" } == [
                    "alpha/ios", "alpha/macos", "bravo/ios", "bravo/macos", "charlie/ios", "charlie/macos",
                ])
            let keys: Set<String> = [
                "tenant", "platform", "status", "mode", "non_qualifying_providers", "qualifying_providers", "exemption", "fix",
            ]
            for report in reports { #expect(Set(report.keys) == keys, "\(report)") }
            #expect(reports.map { $0["status"] as? String } == ["compliant", "compliant", "exempt", "exempt", "violation", "compliant"])
            // A failed setup leaves fewer rows: a failed expectation, never an index out of range.
            try #require(reports.count == 6)
            #expect(reports[0]["qualifying_providers"] as? [String] == ["apple"])
            #expect(reports[0]["non_qualifying_providers"] as? [String] == ["google"])
            #expect(reports[0]["exemption"] is NSNull && reports[0]["fix"] is NSNull)
            #expect((reports[2]["exemption"] as? [String: Any])?["reason"] as? String == "government-id")
            #expect(reports[4]["mode"] as? String == "privacy-equivalent")
            #expect(reports[4]["non_qualifying_providers"] as? [String] == ["google"])
            #expect(reports[4]["qualifying_providers"] as? [String] == [])
            #expect(reports[4]["exemption"] is NSNull)
            #expect((reports[4]["fix"] as? String)?.contains("broker apple group add --tenant charlie") == true)
            #expect((reports[4]["fix"] as? String)?.contains("broker provider attest --tenant charlie --provider google") == true)

            let text = try await cli.run("policy", "check")
            #expect(text.status == 1)
            #expect(text.output.contains("charlie ios: google offered without a qualifying option. Fix: "), "\(text.output)")
            #expect(text.output.contains("error: 1 of 6 tenant platforms violate App Store Review Guideline 4.8."), "\(text.output)")
            let one = try await cli.run("policy", "check", "--tenant", "charlie", "--json")
            #expect(one.status == 1)
            #expect(try one.array().count == 2)
            #expect(try await cli.run("policy", "check", "--tenant", "alpha").status == 0)
            let nobody = try await cli.run("policy", "check", "--tenant", "nobody")
            #expect(nobody.status == 1 && nobody.output.contains("There is no tenant 'nobody'"))

            // Fixed by attesting: compliant again.
            #expect(
                try await cli.run(["provider", "attest", "--tenant", "charlie", "--provider", "google"] + PolicyCLI.attestFlags).status == 0
            )
            #expect(try await cli.run("policy", "check").status == 0)
        }
    }
}

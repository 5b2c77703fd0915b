import BrokerCore
import Foundation
import Storage
import TestSupport
import Testing

/// `broker provider enable|disable|list|show` against a fresh database, as an operator runs
/// them: Google's and Facebook's settings round-trip, bad input changes nothing, and the
/// Facebook app secret never shows (output, audit log, database dump).
@Suite struct ProviderCLITests {
    /// Every output of the CLI runs of one test, to search them all for the secret.
    final class Transcript: @unchecked Sendable {
        let cli: BrokerCLI
        private(set) var outputs: [(arguments: [String], output: String)] = []

        init(url: String) { cli = BrokerCLI(databaseURL: url) }

        @discardableResult
        func run(_ arguments: String...) async throws -> BrokerCLI.Result { try await run(arguments) }

        func run(_ arguments: [String]) async throws -> BrokerCLI.Result {
            let result = try await cli.run(arguments)
            outputs.append((arguments, result.output))
            return result
        }
    }

    static func writeFile(_ content: String) throws -> String {
        let path = NSTemporaryDirectory() + "fb-secret-\(UUID().uuidString.prefix(8)).txt"
        try content.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// A distinctive secret: `s3cr3t-` and 32 random hex digits.
    static func makeSecret() -> String {
        "s3cr3t-" + (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    /// The PostgreSQL client programs beside the test cluster's server.
    static func postgresBin() throws -> String {
        if let bin = ProcessInfo.processInfo.environment["BROKER_POSTGRES_BIN"], !bin.isEmpty { return bin }
        let root = "/usr/lib/postgresql"
        let versions = try FileManager.default.contentsOfDirectory(atPath: root)
            .filter { FileManager.default.isExecutableFile(atPath: "\(root)/\($0)/bin/pg_dump") }
            .sorted { $0.compare($1, options: .numeric) == .orderedAscending }
        return "\(root)/\(try #require(versions.last, "no PostgreSQL under \(root)"))/bin"
    }

    @Test func operatorRoundTripKeepsTheAppSecretSecret() async throws {
        try await TestDatabase.withFresh { database, url in
            let cli = Transcript(url: url)
            let secret = Self.makeSecret()
            let appID = "1234567890123"
            #expect(try await cli.run("tenant", "create", "acme").status == 0)
            // Google and Facebook on iOS with no Apple: the tenant is exempt from guideline 4.8
            // (PolicyCLITests covers the policy).
            #expect(
                try await cli.run(
                    "policy", "exempt", "--tenant", "acme", "--reason", "own-accounts-only", "--note", "Test tenant"
                ).status == 0)
            let tenant = try #require(try await database.tenants.find(slug: "acme"))

            // Nothing but Apple's row, and nothing enabled.
            let initial = try await cli.run("provider", "list", "--tenant", "acme", "--json")
            #expect(initial.status == 0, "\(initial.output)")
            let rows = try initial.array()
            #expect(rows.compactMap { $0["provider"] as? String } == ["apple", "google", "facebook"])
            #expect(rows.compactMap { $0["type"] as? String } == ["apple", "google", "facebook"])
            #expect(rows.allSatisfy { $0["enabled"] as? Bool == false })
            #expect(rows.allSatisfy { $0["has_app_secret"] as? Bool == false })
            let table = try await cli.run("provider", "list", "--tenant", "acme")
            #expect(table.status == 0)
            for name in ["apple", "google", "facebook"] {
                #expect(table.output.split(separator: "\n").contains { $0.hasPrefix(name) && $0.contains(" no ") }, "\(table.output)")
            }
            let notYet = try await cli.run("provider", "show", "google", "--tenant", "acme")
            #expect(notYet.status == 0 && notYet.output.contains("google (google): not enabled"), "\(notYet.output)")

            // Google: two clients, a Workspace domain, three platforms.
            let google = try await cli.run(
                "provider", "enable", "google", "--tenant", "acme", "--client-id", "111-ios.apps.googleusercontent.com",
                "--client-id", "111-web.apps.googleusercontent.com", "--hosted-domain", "Example.COM", "--platforms", "web,ios,android",
                "--json")
            #expect(google.status == 0, "\(google.output)")
            #expect(try google.object()["enabled"] as? Bool == true)
            let shownGoogle = try await cli.run("provider", "show", "google", "--tenant", "acme", "--json").object()
            #expect(shownGoogle["provider"] as? String == "google")
            #expect(shownGoogle["enabled"] as? Bool == true)
            #expect(
                shownGoogle["client_ids"] as? [String] == ["111-ios.apps.googleusercontent.com", "111-web.apps.googleusercontent.com"])
            #expect(shownGoogle["hosted_domain"] as? String == "example.com")
            #expect(shownGoogle["platforms"] as? [String] == ["ios", "android", "web"])
            #expect(shownGoogle["has_app_secret"] as? Bool == false)
            #expect(shownGoogle["app_id"] is NSNull)
            #expect(shownGoogle["limited_login"] is NSNull)
            #expect(shownGoogle["type"] as? String == "google")
            #expect(shownGoogle["display_name"] as? String == "Google")
            #expect((shownGoogle["settings"] as? [String: Any])?["hosted_domain"] as? String == "example.com")
            #expect((shownGoogle["abilities"] as? [String])?.contains("id_tokens") == true)
            let googleText = try await cli.run("provider", "show", "google", "--tenant", "acme")
            #expect(googleText.output.contains("google (google): enabled"), "\(googleText.output)")
            #expect(googleText.output.contains("hosted domain: example.com"))
            #expect(googleText.output.contains("111-ios.apps.googleusercontent.com, 111-web.apps.googleusercontent.com"))

            // Re-running enable replaces every setting: one client, no domain, no platforms.
            let replaced = try await cli.run(
                "provider", "enable", "google", "--tenant", "acme", "--client-id", "222-web.apps.googleusercontent.com")
            #expect(replaced.status == 0, "\(replaced.output)")
            #expect(replaced.output.contains("google is enabled for tenant 'acme'."))
            let shownReplaced = try await cli.run("provider", "show", "google", "--tenant", "acme", "--json").object()
            #expect(shownReplaced["client_ids"] as? [String] == ["222-web.apps.googleusercontent.com"])
            #expect(shownReplaced["hosted_domain"] is NSNull)
            #expect(shownReplaced["platforms"] as? [String] == [])
            #expect(shownReplaced["enabled"] as? Bool == true)
            let replacedText = try await cli.run("provider", "show", "google", "--tenant", "acme")
            #expect(!replacedText.output.contains("hosted domain"))
            #expect(!replacedText.output.contains("111-"))
            let storedGoogle = try #require(try await database.providerConfigs.find(tenantID: tenant.id, provider: .google))
            #expect(storedGoogle.clientIDs == ["222-web.apps.googleusercontent.com"])
            #expect(storedGoogle.hostedDomain == nil)
            #expect(storedGoogle.platforms.isEmpty)

            // Facebook: the secret file has whitespace around the secret and a trailing newline.
            let secretFile = try Self.writeFile("  \t\(secret) \n\n")
            defer { try? FileManager.default.removeItem(atPath: secretFile) }
            let facebook = try await cli.run(
                "provider", "enable", "facebook", "--tenant", "acme", "--app-id", appID, "--app-secret-file", secretFile,
                "--platforms", "android,ios")
            #expect(facebook.status == 0, "\(facebook.output)")
            #expect(facebook.output.contains("app secret:    set (encrypted; never shown)"))
            #expect(facebook.output.contains("limited login: off"))
            let limited = try await cli.run(
                "provider", "enable", "facebook", "--tenant", "acme", "--app-id", appID, "--app-secret-file", secretFile,
                "--limited-login", "--platforms", "android,ios", "--json")
            #expect(limited.status == 0, "\(limited.output)")
            #expect(try limited.object()["limited_login"] as? Bool == true)

            // Stored sealed, and what is sealed is the trimmed secret.
            let stored = try #require(try await database.providerConfigs.find(tenantID: tenant.id, provider: .facebook))
            #expect(stored.appID == appID)
            #expect(stored.limitedLogin)
            #expect(stored.platforms == [.ios, .android])
            let sealed = try #require(stored.sealedSecret)
            #expect(sealed.range(of: Data(secret.utf8)) == nil)
            let opened = try TestDatabase.secrets.open(
                sealed, context: ProviderConfiguration.secretContext(tenantID: tenant.id, provider: .facebook, clientID: appID),
                what: "Facebook app secret")
            #expect(String(decoding: opened, as: UTF8.self) == secret)
            // Sealed for this tenant and app only.
            #expect(throws: BrokerError.self) {
                _ = try TestDatabase.secrets.open(
                    sealed, context: ProviderConfiguration.secretContext(tenantID: tenant.id, provider: .facebook, clientID: "1"),
                    what: "Facebook app secret")
            }

            let listed = try await cli.run("provider", "list", "--tenant", "acme", "--json").array()
            let listedFacebook = try #require(listed.first { $0["provider"] as? String == "facebook" })
            #expect(listedFacebook["enabled"] as? Bool == true)
            #expect(listedFacebook["app_id"] as? String == appID)
            #expect(listedFacebook["has_app_secret"] as? Bool == true)
            #expect(listedFacebook["limited_login"] as? Bool == true)
            #expect(listedFacebook["platforms"] as? [String] == ["ios", "android"])
            #expect(listedFacebook["client_ids"] as? [String] == [])
            #expect(listed.first { $0["provider"] as? String == "google" }?["enabled"] as? Bool == true)
            let shownFacebook = try await cli.run("provider", "show", "facebook", "--tenant", "acme", "--json").object()
            #expect(shownFacebook["app_id"] as? String == appID)
            #expect(shownFacebook["has_app_secret"] as? Bool == true)
            #expect(shownFacebook["limited_login"] as? Bool == true)
            #expect(shownFacebook["enabled"] as? Bool == true)
            #expect(
                Set(shownFacebook.keys).isSuperset(of: [
                    "provider", "enabled", "platforms", "client_ids", "hosted_domain", "app_id", "has_app_secret", "limited_login",
                    "updated_at",
                ]))
            let facebookText = try await cli.run("provider", "show", "facebook", "--tenant", "acme")
            #expect(facebookText.output.contains("app id:        \(appID)"))
            #expect(facebookText.output.contains("limited login: on"))
            let listText = try await cli.run("provider", "list", "--tenant", "acme")
            #expect(listText.output.contains(appID))

            // Bad input: exit 1 with a hint, and nothing changes.
            let before = try await database.providerConfigs.list(tenantID: tenant.id)
            let auditBefore = try await cli.run("audit", "list", "--tenant", "acme", "--limit", "1000", "--json").array().count
            let directory = NSTemporaryDirectory()
            let spaced = try Self.writeFile("s3cr3t part two\n")
            let empty = try Self.writeFile(" \n")
            defer {
                try? FileManager.default.removeItem(atPath: spaced)
                try? FileManager.default.removeItem(atPath: empty)
            }
            let bad: [(arguments: [String], message: String, hint: String)] = [
                (
                    ["enable", "github", "--tenant", "acme", "--client-id", "x"], "Give the type of the new provider 'github'.",
                    "--type oidc"
                ),
                (["enable", "Git Hub", "--tenant", "acme", "--client-id", "x"], "'Git Hub' is not a provider id.", "the tenant's own id"),
                (
                    ["enable", "apple", "--tenant", "acme", "--client-id", "com.acme.app"], "Apple takes no settings here.",
                    "'broker apple ...'"
                ),
                (
                    ["enable", "google", "--tenant", "acme", "--hosted-domain", "example.com"], "Give at least one --client-id.",
                    "Repeat --client-id"
                ),
                (["enable", "google", "--tenant", "acme", "--client-id", " "], "is not a client id", "OAuth client id"),
                (
                    ["enable", "google", "--tenant", "acme", "--client-id", "x", "--app-id", appID],
                    "--app-id is not a setting of a google provider.",
                    "A google provider takes: --client-id, --hosted-domain, --client-secret-file, --return-url, --redirect-uri, --scopes."
                ),
                (
                    ["enable", "facebook", "--tenant", "acme", "--app-id", appID], "Facebook needs --app-id and --app-secret-file.",
                    "broker provider enable facebook --tenant <slug>"
                ),
                (
                    ["enable", "facebook", "--tenant", "acme", "--app-secret-file", secretFile],
                    "Facebook needs --app-id and --app-secret-file.", "--app-id <ID>"
                ),
                (
                    ["enable", "facebook", "--tenant", "acme", "--app-id", appID, "--app-secret-file", "/nonexistent/fb-secret.txt"],
                    "Cannot read the app secret file '/nonexistent/fb-secret.txt'", "Check the path"
                ),
                (
                    ["enable", "facebook", "--tenant", "acme", "--app-id", appID, "--app-secret-file", directory],
                    "Cannot read the app secret file", "Check the path"
                ),
                (
                    ["enable", "facebook", "--tenant", "acme", "--app-id", appID, "--app-secret-file", spaced],
                    "holds no usable secret", "App Secret"
                ),
                (
                    ["enable", "facebook", "--tenant", "acme", "--app-id", appID, "--app-secret-file", empty],
                    "holds no usable secret", "App Secret"
                ),
                (
                    ["enable", "facebook", "--tenant", "acme", "--app-id", "acme-app", "--app-secret-file", secretFile],
                    "--app-id 'acme-app' is not a Facebook app id", "numeric App ID"
                ),
                (
                    ["enable", "facebook", "--tenant", "acme", "--app-id", "12 34", "--app-secret-file", secretFile],
                    "is not a Facebook app id", "numeric App ID"
                ),
                (
                    ["enable", "facebook", "--tenant", "acme", "--app-id", appID, "--app-secret-file", secretFile, "--client-id", "x"],
                    "--client-id is not a setting of a facebook provider.", "A facebook provider takes: --app-id"
                ),
                (
                    ["enable", "google", "--tenant", "acme", "--client-id", "x", "--platforms", "ios,windows"],
                    "--platforms 'ios,windows' is not a list of ios, android, web and macos", "--platforms ios,android,web"
                ),
                (
                    [
                        "enable", "facebook", "--tenant", "acme", "--app-id", appID, "--app-secret-file", secretFile, "--platforms",
                        "ios,ios",
                    ],
                    "is not a list of ios, android, web and macos", "--platforms ios,android,web"
                ),
                (
                    ["enable", "google", "--tenant", "acme", "--client-id", "x", "--hosted-domain", "example"],
                    "--hosted-domain 'example' is not a domain name", "Workspace domain"
                ),
                (
                    ["enable", "google", "--tenant", "acme", "--client-id", "x", "--hosted-domain", "https://example.com"],
                    "is not a domain name", "Workspace domain"
                ),
                (
                    ["enable", "google", "--tenant", "acme", "--client-id", "x", "--hosted-domain=-bad.example.com"],
                    "is not a domain name", "Workspace domain"
                ),
                (["enable", "google", "--tenant", "nobody", "--client-id", "x"], "There is no tenant 'nobody'", "broker tenant list"),
                (
                    ["enable", "facebook", "--tenant", "nobody", "--app-id", appID, "--app-secret-file", secretFile],
                    "There is no tenant 'nobody'", "broker tenant list"
                ),
                (["disable", "google", "--tenant", "nobody"], "There is no tenant 'nobody'", "broker tenant list"),
                (
                    ["disable", "github", "--tenant", "acme"], "Tenant 'acme' has no provider 'github'.",
                    "broker provider list --tenant acme"
                ),
                (["show", "github", "--tenant", "acme"], "Tenant 'acme' has no provider 'github'.", "broker provider list --tenant acme"),
                (["list", "--tenant", "nobody"], "There is no tenant 'nobody'", "broker tenant list"),
            ]
            for (arguments, message, hint) in bad {
                let result = try await cli.run(["provider"] + arguments)
                #expect(result.status == 1, "\(arguments): \(result.output)")
                #expect(result.output.contains("error: ") && result.output.contains(message), "\(arguments): \(result.output)")
                let hintLine = result.output.split(separator: "\n").first { $0.hasPrefix("hint: ") }
                #expect(hintLine?.contains(hint) == true, "\(arguments): \(result.output)")
                let json = try await cli.run(["provider"] + arguments + ["--json"])
                #expect(json.status == 1, "\(arguments) --json")
                let error = try json.object()["error"] as? [String: Any]
                #expect((error?["hint"] as? String)?.contains(hint) == true, "\(arguments) --json: \(json.output)")
            }
            #expect(try await database.providerConfigs.list(tenantID: tenant.id) == before)
            #expect(try await cli.run("audit", "list", "--tenant", "acme", "--limit", "1000", "--json").array().count == auditBefore)

            // Disable Google: its settings are kept; a second disable is refused; a bare enable
            // turns it back on with them.
            let disabled = try await cli.run("provider", "disable", "google", "--tenant", "acme")
            #expect(disabled.status == 0, "\(disabled.output)")
            #expect(disabled.output.contains("google is disabled for tenant 'acme'; its settings and identities are kept."))
            let shownDisabled = try await cli.run("provider", "show", "google", "--tenant", "acme", "--json").object()
            #expect(shownDisabled["enabled"] as? Bool == false)
            #expect(shownDisabled["client_ids"] as? [String] == ["222-web.apps.googleusercontent.com"])
            #expect(try await cli.run("provider", "show", "google", "--tenant", "acme").output.contains("google (google): not enabled"))
            let storedDisabled = try #require(try await database.providerConfigs.find(tenantID: tenant.id, provider: .google))
            #expect(!storedDisabled.enabled)
            #expect(storedDisabled.clientIDs == ["222-web.apps.googleusercontent.com"])
            let again = try await cli.run("provider", "disable", "google", "--tenant", "acme")
            #expect(again.status == 1, "\(again.output)")
            #expect(again.output.contains("google is already disabled for tenant 'acme'."), "\(again.output)")
            #expect(again.output.contains("hint: Turn it back on with 'broker provider enable google --tenant acme'."))
            let againJSON = try await cli.run("provider", "disable", "google", "--tenant", "acme", "--json")
            #expect(againJSON.status == 1)
            #expect((try againJSON.object()["error"] as? [String: Any])?["code"] as? String == "provider_not_enabled")
            let reenabled = try await cli.run("provider", "enable", "google", "--tenant", "acme", "--json")
            #expect(reenabled.status == 0, "\(reenabled.output)")
            #expect(try reenabled.object()["enabled"] as? Bool == true)
            #expect(try reenabled.object()["client_ids"] as? [String] == ["222-web.apps.googleusercontent.com"])
            // Apple is turned off and on the same way (its team, groups and clients are 'broker apple').
            let appleOff = try await cli.run("provider", "disable", "apple", "--tenant", "acme")
            #expect(appleOff.status == 0, "\(appleOff.output)")
            #expect(appleOff.output.contains("apple is disabled for tenant 'acme'"), "\(appleOff.output)")
            #expect(try await database.providerConfigs.find(tenantID: tenant.id, provider: .apple)?.enabled == false)
            #expect(try await cli.run("provider", "enable", "apple", "--tenant", "acme").status == 0)
            #expect(try await database.providerConfigs.find(tenantID: tenant.id, provider: .apple)?.enabled == true)
            // Facebook is untouched.
            let stillFacebook = try await cli.run("provider", "show", "facebook", "--tenant", "acme", "--json").object()
            #expect(stillFacebook["enabled"] as? Bool == true && stillFacebook["has_app_secret"] as? Bool == true)

            // The audit log records the operator's actions, never the secret.
            let audit = try await cli.run("audit", "list", "--tenant", "acme", "--limit", "1000", "--json")
            #expect(audit.status == 0, "\(audit.output)")
            let events = try audit.array()
            let providerEvents = events.filter { ($0["action"] as? String)?.hasPrefix("provider.") == true }
            #expect(
                providerEvents.compactMap { $0["action"] as? String } == [
                    "provider.enable", "provider.disable", "provider.enable", "provider.disable", "provider.enable", "provider.enable",
                    "provider.enable", "provider.enable",
                ])
            #expect(
                providerEvents.compactMap { $0["target"] as? String } == [
                    "apple", "apple", "google", "google", "facebook", "facebook", "google", "google",
                ])
            for event in events {
                let row = String(decoding: try JSONSerialization.data(withJSONObject: event), as: UTF8.self)
                #expect(!row.contains(secret), "audit row: \(row)")
            }

            // No output of any command showed the secret.
            #expect(cli.outputs.count > 60)
            for (arguments, output) in cli.outputs {
                #expect(!output.contains(secret), "\(arguments) printed the app secret")
                #expect(!output.contains(String(secret.dropFirst(7))), "\(arguments) printed the app secret's random part")
            }

            // Nor does a dump of the database: the row is there, the secret only sealed.
            let pgDump = try Self.postgresBin() + "/pg_dump"
            let dump = try await onOwnThread { try ProcessRunner.run(pgDump, ["--no-password", "--dbname=\(url)"]) }
            #expect(dump.status == 0, "\(dump.output.prefix(2_000))")
            #expect(dump.output.contains("COPY public.provider_configs"))
            #expect(dump.output.contains("{\(appID)}"))
            #expect(dump.output.contains("provider.enable"))
            #expect(!dump.output.contains(secret))
            #expect(!dump.output.contains(String(secret.dropFirst(7))))
            // bytea is dumped as hex: not the secret's bytes in hex either.
            let secretHex = Data(secret.utf8).map { String(format: "%02x", $0) }.joined()
            #expect(!dump.output.lowercased().contains(secretHex))
            // The sealed secret is what is stored.
            let sealedHex = sealed.map { String(format: "%02x", $0) }.joined()
            #expect(dump.output.contains("\\x" + sealedHex))
        }
    }
}

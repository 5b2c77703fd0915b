import BrokerCore
import Crypto
import Foundation
import Hummingbird
import MockIdP
import PostgresNIO
import Storage
import TestSupport
import Testing

/// `broker provider enable <id> --type oidc` as an operator runs it, against MockIdP's `line`
/// issuer on loopback: discovery at enable, `show` and `list` print the issuer and its
/// jwks_uri, a discovery document naming another issuer stores nothing, and Apple is turned
/// off and on again.
// A guard against a hang, not a bound on speed: every suite runs at once, so a test here takes
// about as long as the whole run (150-160 s on two cores), whatever it takes alone (1-20 s).
@Suite(.timeLimit(.minutes(10))) struct ProviderOIDCCommandTests {
    /// Runs the CLI without holding a thread of the cooperative pool (``BrokerCLI/run(_:)-([String])``):
    /// MockIdP answers it from this same test process.
    static func run(_ cli: BrokerCLI, _ arguments: String...) async throws -> BrokerCLI.Result {
        try await cli.run(arguments)
    }

    /// MockIdP serving `issuers` on 127.0.0.1 for the duration of `body`, which gets its base URL.
    static func withMock(_ issuers: [MockOIDCIssuer], _ body: @Sendable (String) async throws -> Void) async throws {
        try await ServedApplication.with({ listening in
            MockIdPServer.application(apple: nil, google: nil, facebook: nil, oidc: issuers, port: 0) { listening($0) }
        }) { port in
            try await body("http://127.0.0.1:\(port)")
        }
    }

    @Test func enableShowListAndAWrongIssuerThatStoresNothing() async throws {
        let line = try MockOIDCIssuer(name: "line")
        let yahoo = try MockOIDCIssuer(name: "yahoo")
        try await Self.withMock([line, yahoo]) { base in
            try await TestDatabase.withFresh { database, url in
                let cli = BrokerCLI(databaseURL: url)
                #expect(try await Self.run(cli, "tenant", "create", "acme").status == 0)
                let issuer = line.issuer(base: base)

                let enabled = try await Self.run(
                    cli, "provider", "enable", "line", "--tenant", "acme", "--type", "oidc", "--issuer", issuer, "--client-id",
                    "1657000001",
                    "--display-name", "LINE", "--platforms", "web,android", "--json")
                #expect(enabled.status == 0, "\(enabled.output)")
                let status = try enabled.object()
                #expect(status["provider"] as? String == "line")
                #expect(status["type"] as? String == "oidc")
                #expect(status["enabled"] as? Bool == true)
                #expect(line.discoveryFetches == 1)

                let shown = try await Self.run(cli, "provider", "show", "line", "--tenant", "acme", "--json")
                #expect(shown.status == 0, "\(shown.output)")
                let object = try shown.object()
                #expect(object["type"] as? String == "oidc")
                #expect(object["display_name"] as? String == "LINE")
                #expect(object["client_ids"] as? [String] == ["1657000001"])
                #expect(object["platforms"] as? [String] == ["android", "web"])
                let settings = try #require(object["settings"] as? [String: Any])
                #expect(settings["issuer"] as? String == issuer)
                #expect(settings["jwks_uri"] as? String == line.jwksURL(base: base))
                #expect(settings["email_trust"] as? String == "never")
                let text = try await Self.run(cli, "provider", "show", "line", "--tenant", "acme")
                #expect(text.status == 0)
                #expect(text.output.contains("line (oidc): enabled"), "\(text.output)")
                #expect(text.output.contains(issuer))
                #expect(text.output.contains(line.jwksURL(base: base)))

                let listed = try await Self.run(cli, "provider", "list", "--tenant", "acme", "--json")
                #expect(listed.status == 0, "\(listed.output)")
                let rows = try listed.array()
                #expect(rows.compactMap { $0["provider"] as? String } == ["apple", "google", "facebook", "line"])
                #expect(rows.last?["type"] as? String == "oidc")
                let table = try await Self.run(cli, "provider", "list", "--tenant", "acme")
                #expect(table.output.split(separator: "\n").contains { $0.hasPrefix("line") }, "\(table.output)")

                // Ids are written as they are: capitals are refused, not folded into `line`
                // (issue 39 F13), and the LINE provider keeps its issuer and client ids.
                for id in ["Line", "LINE", "lIne", "line_2", "l", "1line"] {
                    let folded = try await Self.run(
                        cli, "provider", "enable", id, "--tenant", "acme", "--type", "oidc", "--issuer", yahoo.issuer(base: base),
                        "--client-id", "other", "--platforms", "web")
                    #expect(folded.status != 0, "\(id): \(folded.output)")
                    #expect(folded.output.contains("not a provider id"), "\(folded.output)")
                }
                let kept = try await Self.run(cli, "provider", "show", "line", "--tenant", "acme", "--json").object()
                #expect(kept["client_ids"] as? [String] == ["1657000001"])
                #expect((kept["settings"] as? [String: Any])?["issuer"] as? String == issuer)
                #expect(yahoo.discoveryFetches == 0)

                // Discovery names another issuer: refused, nothing stored.
                yahoo.discoveryFault = .wrongIssuer
                let wrong = try await Self.run(
                    cli, "provider", "enable", "yahoo", "--tenant", "acme", "--type", "oidc", "--issuer", yahoo.issuer(base: base),
                    "--client-id", "dj00yahoo", "--platforms", "web")
                #expect(wrong.status != 0)
                #expect(wrong.output.contains(MockOIDCIssuer.wrongIssuerBase), "\(wrong.output)")
                #expect(wrong.output.contains("Nothing was stored"))
                #expect(yahoo.discoveryFetches == 1)
                let tenant = try #require(try await database.tenants.find(slug: "acme"))
                #expect(
                    try await database.providerConfigs.find(tenantID: tenant.id, provider: try #require(ProviderID(rawValue: "yahoo")))
                        == nil)
                #expect(try await Self.run(cli, "provider", "show", "yahoo", "--tenant", "acme").status != 0)
                let json = try await Self.run(
                    cli, "provider", "enable", "yahoo", "--tenant", "acme", "--type", "oidc", "--issuer", yahoo.issuer(base: base),
                    "--client-id", "dj00yahoo", "--platforms", "web", "--json")
                #expect(json.status != 0)
                #expect((try json.object()["error"] as? [String: Any])?["code"] as? String == "issuer_mismatch", "\(json.output)")
            }
        }
    }

    @Test func disableAppleThenEnableApple() async throws {
        let line = try MockOIDCIssuer(name: "line")
        try await Self.withMock([line]) { base in
            try await TestDatabase.withFresh { _, url in
                let cli = BrokerCLI(databaseURL: url)
                #expect(try await Self.run(cli, "tenant", "create", "acme").status == 0)
                let p8 = NSTemporaryDirectory() + "AuthKey_\(UUID().uuidString.prefix(6)).p8"
                try P256.Signing.PrivateKey().pemRepresentation.write(toFile: p8, atomically: true, encoding: .utf8)
                defer { try? FileManager.default.removeItem(atPath: p8) }
                let team = try await Self.run(
                    cli, "apple", "team", "set", "--tenant", "acme", "--team-id", "ABCDE12345", "--key-id", "KEY1234567",
                    "--private-key-file", p8)
                #expect(team.status == 0, "\(team.output)")
                #expect(
                    try await Self.run(cli, "apple", "group", "add", "--tenant", "acme", "--primary-app-id", "com.acme.app").status == 0)
                let enabled = try await Self.run(
                    cli, "provider", "enable", "line", "--tenant", "acme", "--type", "oidc", "--issuer", line.issuer(base: base),
                    "--client-id", "1657000001", "--platforms", "web,android")
                #expect(enabled.status == 0, "\(enabled.output)")

                func apple() async throws -> [String: Any] {
                    try await Self.run(cli, "provider", "show", "apple", "--tenant", "acme", "--json").object()
                }
                #expect(try await apple()["enabled"] as? Bool == true)
                let disabled = try await Self.run(cli, "provider", "disable", "apple", "--tenant", "acme")
                #expect(disabled.status == 0, "\(disabled.output)")
                #expect(try await apple()["enabled"] as? Bool == false)
                // LINE is untouched.
                let lineRow = try await Self.run(cli, "provider", "show", "line", "--tenant", "acme", "--json").object()
                #expect(lineRow["enabled"] as? Bool == true)
                let again = try await Self.run(cli, "provider", "enable", "apple", "--tenant", "acme")
                #expect(again.status == 0, "\(again.output)")
                #expect(try await apple()["enabled"] as? Bool == true)
                #expect(try await apple()["client_ids"] as? [String] == ["com.acme.app"], "its groups and clients were kept")
                // Apple takes no settings here.
                let withSettings = try await Self.run(
                    cli, "provider", "enable", "apple", "--tenant", "acme", "--client-id", "com.acme.app")
                #expect(withSettings.status != 0)
            }
        }
    }

    @Test func theWebFlowIsTurnedOnWithASecretThatIsNeverPrinted() async throws {
        let line = try MockOIDCIssuer(name: "line")
        try await Self.withMock([line]) { base in
            try await TestDatabase.withFresh { database, url in
                let cli = BrokerCLI(databaseURL: url)
                #expect(try await Self.run(cli, "tenant", "create", "acme").status == 0)
                let folder = FileManager.default.temporaryDirectory.appendingPathComponent("web-\(UUID().uuidString)")
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
                defer { try? FileManager.default.removeItem(at: folder) }
                let secretFile = folder.appendingPathComponent("secret.txt")
                try "channel-secret-never-printed\n".write(to: secretFile, atomically: true, encoding: .utf8)
                let issuer = line.issuer(base: base)

                // A secret without a return URL is refused, nothing stored.
                let noReturn = try await Self.run(
                    cli, "provider", "enable", "line", "--tenant", "acme", "--type", "oidc", "--issuer", issuer, "--client-id",
                    "1657000001",
                    "--client-secret-file", secretFile.path)
                #expect(noReturn.status != 0)
                #expect(noReturn.output.contains("--return-url"), "\(noReturn.output)")
                #expect(try await Self.run(cli, "provider", "show", "line", "--tenant", "acme").status != 0)

                let enabled = try await Self.run(
                    cli, "provider", "enable", "line", "--tenant", "acme", "--type", "oidc", "--issuer", issuer, "--client-id",
                    "1657000001",
                    "--client-id", "1657000009", "--client-secret-file", secretFile.path, "--return-url", "https://shop.example.com/done",
                    "--scopes", "openid profile", "--platforms", "web")
                #expect(enabled.status == 0, "\(enabled.output)")
                #expect(!enabled.output.contains("channel-secret-never-printed"))
                let shown = try await Self.run(cli, "provider", "show", "line", "--tenant", "acme", "--json")
                #expect(!shown.output.contains("channel-secret-never-printed"))
                let settings = try #require(try shown.object()["settings"] as? [String: Any])
                #expect(settings["web_client_id"] as? String == "1657000001")
                #expect(settings["return_urls"] as? [String] == ["https://shop.example.com/done"])
                #expect(settings["scopes"] as? String == "openid profile")
                #expect(settings["token_endpoint"] as? String == issuer + "/token")
                #expect(settings["authorization_endpoint"] as? String == issuer + "/authorize")
                #expect(settings["token_auth_method"] as? String == "client_secret_basic")
                #expect(settings["redirect_uri"] is NSNull)

                // At rest the secret is sealed: its text is nowhere in the row.
                let rows = try await database.client.query(
                    "SELECT secret_sealed, settings::text FROM provider_configs WHERE provider = 'line'")
                for try await (sealed, json) in rows.decode((Data?, String).self) {
                    let sealedText = String(decoding: sealed ?? Data(), as: UTF8.self)
                    #expect(sealed != nil && !sealedText.contains("channel-secret"))
                    #expect(!json.contains("channel-secret"))
                }
            }
        }
    }
}

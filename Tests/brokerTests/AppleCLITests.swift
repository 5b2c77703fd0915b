import Crypto
import Foundation
import TestSupport
import Testing

@Suite struct AppleCLITests {
    func writeP8() throws -> String {
        let path = NSTemporaryDirectory() + "AuthKey_\(UUID().uuidString.prefix(6)).p8"
        try P256.Signing.PrivateKey().pemRepresentation.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func configureTeamGroupsAndClients() async throws {
        try await TestDatabase.withFresh { _, url in
            let cli = BrokerCLI(databaseURL: url)
            #expect(try await cli.run("tenant", "create", "acme").status == 0)

            let early = try await cli.run("apple", "group", "add", "--tenant", "acme", "--primary-app-id", "com.acme.app")
            #expect(early.status == 1 && early.output.contains("apple team set"))

            let p8 = try writeP8()
            defer { try? FileManager.default.removeItem(atPath: p8) }
            let badTeam = try await cli.run(
                "apple", "team", "set", "--tenant", "acme", "--team-id", "short", "--key-id", "ABCDEFGHIJ", "--private-key-file", p8)
            #expect(badTeam.status == 1 && badTeam.output.contains("10 uppercase letters and digits"))
            let notAKey = try await cli.run(
                "apple", "team", "set", "--tenant", "acme", "--team-id", "ABCDE12345", "--key-id", "KEY1234567",
                "--private-key-file", "/etc/hostname")
            #expect(notAKey.status == 1 && notAKey.output.contains(".p8"))
            let team = try await cli.run(
                "apple", "team", "set", "--tenant", "acme", "--team-id", "ABCDE12345", "--key-id", "KEY1234567",
                "--private-key-file", p8)
            #expect(team.status == 0, "\(team.output)")

            #expect(try await cli.run("apple", "group", "add", "--tenant", "acme", "--primary-app-id", "com.acme.app").status == 0)
            let web = try await cli.run(
                "apple", "client", "add", "--tenant", "acme", "--group", "com.acme.app", "--client-id", "com.acme.web",
                "--kind", "service", "--redirect-uri", "https://acme.example.com/cb", "--return-url", "https://acme.example.com/done")
            #expect(web.status == 0, "\(web.output)")
            let raw = try await cli.run(
                "apple", "client", "add", "--tenant", "acme", "--group", "com.acme.app", "--client-id", "com.acme.clip",
                "--kind", "app", "--nonce", "raw", "--no-nonce-required")
            #expect(raw.status == 0)
            // The nonce requirement: on by default, off with --no-nonce-required, changed by `client set`.
            let set = try await cli.run(
                "apple", "client", "set", "--tenant", "acme", "--client-id", "com.acme.web", "--no-nonce-required", "--json")
            #expect(set.status == 0, "\(set.output)")
            #expect(try set.object()["nonce_required"] as? Bool == false)
            let unknown = try await cli.run("apple", "client", "set", "--tenant", "acme", "--client-id", "com.nope", "--nonce-required")
            #expect(unknown.status != 0 && unknown.output.contains("apple show"))

            // One group per client id; a Services ID may not reuse an App ID.
            let clash = try await cli.run(
                "apple", "client", "add", "--tenant", "acme", "--group", "com.acme.app", "--client-id", "com.acme.app",
                "--kind", "service")
            #expect(clash.status == 1 && clash.output.contains("already registered"))
            let badKind = try await cli.run(
                "apple", "client", "add", "--tenant", "acme", "--group", "com.acme.app", "--client-id", "com.acme.x",
                "--kind", "watch")
            #expect(badKind.status == 1)
            let noGroup = try await cli.run(
                "apple", "client", "add", "--tenant", "acme", "--group", "com.nope", "--client-id", "com.acme.y", "--kind", "app")
            #expect(noGroup.status == 1 && noGroup.output.contains("apple group add"))

            let shown = try await cli.run("apple", "show", "--tenant", "acme", "--json").object()
            let teams = try #require(shown["teams"] as? [[String: Any]])
            #expect(teams.first?["team_id"] as? String == "ABCDE12345")
            #expect(teams.first?["has_private_key"] as? Bool == true)
            let clients = try #require((shown["groups"] as? [[String: Any]])?.first?["clients"] as? [[String: Any]])
            #expect(Set(clients.compactMap { $0["client_id"] as? String }) == ["com.acme.app", "com.acme.web", "com.acme.clip"])
            #expect(clients.first { $0["client_id"] as? String == "com.acme.clip" }?["nonce"] as? String == "raw")
            #expect(clients.first { $0["client_id"] as? String == "com.acme.web" }?["kind"] as? String == "service")
            #expect(clients.first { $0["client_id"] as? String == "com.acme.app" }?["nonce_required"] as? Bool == true)
            #expect(clients.first { $0["client_id"] as? String == "com.acme.clip" }?["nonce_required"] as? Bool == false)
            #expect(clients.first { $0["client_id"] as? String == "com.acme.web" }?["nonce_required"] as? Bool == false)
            let text = try await cli.run("apple", "show", "--tenant", "acme")
            #expect(text.output.contains("group com.acme.app") && text.output.contains(".p8 stored (encrypted)"))
        }
    }
}

/// `broker token verify` on the real Apple tokens in Tests/Fixtures, at a fixed clock.
@Suite struct TokenVerifyCLITests {
    static let fixtures = ProviderFixtures.directory.appendingPathComponent("apple")

    @Test(arguments: ProviderFixtures.appleTokens)
    func realAppleTokensVerifyOneMinuteAfterIssue(_ pair: (token: String, jwks: String)) throws {
        let tokenPath = Self.fixtures.appendingPathComponent(pair.token).path
        let claims = try ProviderFixtures.unverifiedClaims(ofTokenAt: URL(fileURLWithPath: tokenPath))
        let iat = try #require(claims["iat"] as? Double)
        let at = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: iat + 60))
        let audience = try #require(claims["aud"] as? String)
        let result = try BrokerCLI(databaseURL: nil).run(
            "token", "verify", "--provider", "apple", "--token", "@\(tokenPath)",
            "--jwks", Self.fixtures.appendingPathComponent(pair.jwks).path, "--at", at, "--audience", audience, "--json")
        #expect(result.status == 0, "\(result.output)")
        let body = try result.object()
        #expect(body["valid"] as? Bool == true)
        #expect((body["checks"] as? [[String: Any]])?.allSatisfy { $0["passed"] as? Bool == true } == true)
    }

    @Test func expiredAndNegativeTokensDoNotVerify() throws {
        let jwks = Self.fixtures.appendingPathComponent("jwks_apple_86D88Kf_2020_nerdzlab.json").path
        for negative in ["negative_kid_unknown_nerdzlab.jwt", "negative_fake_header_nerdzlab.jwt"] {
            let result = try BrokerCLI(databaseURL: nil).run(
                "token", "verify", "--token", "@\(Self.fixtures.appendingPathComponent(negative).path)", "--jwks", jwks,
                "--at", "2020-04-30T15:00:00Z")
            #expect(result.status == 1, "\(negative)")
            #expect(result.output.contains("FAIL") && result.output.contains("invalid:"))
        }
        // A real token, now: long expired.
        let real = Self.fixtures.appendingPathComponent("idtoken_apple_86D88Kf_2020-04-30_nerdzlab.jwt").path
        let expired = try BrokerCLI(databaseURL: nil).run("token", "verify", "--token", "@\(real)", "--jwks", jwks)
        #expect(expired.status == 1 && expired.output.contains("invalid: token_expired"))
        let wrongAudience = try BrokerCLI(databaseURL: nil).run(
            "token", "verify", "--token", "@\(real)", "--jwks", jwks, "--at", "2020-04-30T14:50:00Z", "--audience", "com.other")
        #expect(wrongAudience.status == 1)
    }
}

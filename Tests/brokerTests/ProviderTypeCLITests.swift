import AsyncHTTPClient
import Foundation
import JWTKit
import MockIdP
import NIOCore
import NIOHTTP1
import Storage
import TestOnlyProviderType
import TestSupport
import Testing

/// A provider type the broker does not ship, through the real command line (issue 41 §4,
/// decision 0079): `broker-with-test-type` is `broker`'s command line with ``TestOnlyProvider``
/// registered by one argument, no other file changed. Its `provider enable` takes the type's
/// flags from the descriptor, `provider show|list` describe it, and its `serve` signs in with it.
@Suite struct ProviderTypeCLITests {
    static let client = "test-only-client"

    @Test func aTestOnlyTypeIsEnabledShownAndSignsInThroughTheRealCommandLine() async throws {
        let signer = try MockOIDCIssuer(name: "test-only-cli", algorithms: [.es256])
        try await TestDatabase.withFresh { _, url in
            let port = TestPorts.next()
            var cli = BrokerCLI(
                databaseURL: url,
                extra: [
                    "BROKER_PORT": "\(port)", "BROKER_LOG_LEVEL": "warning",
                    TestOnlyProvider.jwksVariable: String(decoding: try signer.jwksJSON(), as: UTF8.self),
                ])
            cli.program = "broker-with-test-type"
            let builtInOnly = BrokerCLI(databaseURL: url)

            // The help of `enable` lists the type's flags from its descriptor; `broker`'s does not.
            let help = try await cli.run("provider", "enable", "--help")
            #expect(help.output.contains("<id> --type test-only (Test Only):"), "\(help.output)")
            #expect(help.output.contains("--client-id ID (required, repeatable)"))
            #expect(help.output.contains("The provider type of a new id: oidc, test-only."))
            #expect(try await builtInOnly.run("provider", "enable", "--help").output.contains("test-only") == false)

            #expect(try await cli.run("tenant", "create", "acme").status == 0)
            let key = try #require(try await cli.run("api-key", "create", "--tenant", "acme", "--json").object()["key"] as? String)

            // Enabled with its own flags, in any order, `--name=value` too.
            let enabled = try await cli.run(
                "provider", "enable", "--tenant", "acme", "--display-name=Tester", "tester", "--type", "test-only", "--client-id",
                Self.client, "--platforms", "web", "--json")
            #expect(enabled.status == 0, "\(enabled.output)")
            let shown = try await cli.run("provider", "show", "tester", "--tenant", "acme", "--json").object()
            #expect(shown["type"] as? String == "test-only")
            #expect(shown["display_name"] as? String == "Tester")
            #expect(shown["client_ids"] as? [String] == [Self.client])
            #expect(shown["platforms"] as? [String] == ["web"])
            #expect((shown["settings"] as? [String: Any])?["issuer"] as? String == TestOnlyProvider.issuer)
            let text = try await cli.run("provider", "show", "tester", "--tenant", "acme")
            #expect(text.output.contains("tester (test-only): enabled"), "\(text.output)")
            #expect(text.output.contains("issuer:        \(TestOnlyProvider.issuer)"), "\(text.output)")
            let listed = try await cli.run("provider", "list", "--tenant", "acme", "--json").array()
            #expect(listed.map { $0["provider"] as? String } == ["apple", "google", "facebook", "tester"])

            // A flag of another type is refused by the type's descriptor, naming its own; a flag
            // no type has, by the command line; both exit non-zero and change nothing.
            let otherTypes = try await cli.run(
                "provider", "enable", "tester", "--tenant", "acme", "--client-id", "other", "--issuer", "https://elsewhere.example")
            #expect(otherTypes.status == 1)
            #expect(otherTypes.output.contains("--issuer is not a setting of a test-only provider"), "\(otherTypes.output)")
            #expect(otherTypes.output.contains("--client-id, --display-name"), "\(otherTypes.output)")
            let unknown = try await cli.run("provider", "enable", "tester", "--tenant", "acme", "--colour", "red")
            #expect(unknown.status == 64)
            #expect(unknown.output.contains("--colour is not a setting of any provider type"), "\(unknown.output)")
            let after = try await cli.run("provider", "show", "tester", "--tenant", "acme", "--json").object()
            #expect(after["client_ids"] as? [String] == [Self.client])
            // The shipped `broker` does not know the type.
            let shipped = try await builtInOnly.run(
                "provider", "enable", "other", "--tenant", "acme", "--type", "test-only", "--client-id", Self.client)
            #expect(shipped.status == 1)
            #expect(shipped.output.contains("Unknown provider type 'test-only'"), "\(shipped.output)")

            // `serve` of the same command line signs a person in with it.
            let readiness = try ReadinessSocket.open()
            let server = try readiness.notifying(cli).spawn(["serve"])
            defer {
                server.signal(SIGKILL)
                _ = try? ProcessRunner.wait(server)
            }
            let base = "http://127.0.0.1:\(port)"
            try await readiness.awaitReady(server, base: base)
            func signIn(_ token: String) async throws -> (status: Int, body: [String: Any]) {
                var request = HTTPClientRequest(url: "\(base)/v1/sign-in/tester")
                request.method = .POST
                request.headers.add(name: "Authorization", value: "Bearer \(key)")
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(string: #"{"test_token":"\#(token)"}"#))
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(15))
                let data = Data(String(buffer: try await response.body.collect(upTo: 65_536)).utf8)
                return (Int(response.status.code), (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:])
            }
            func token(audience: String = Self.client) throws -> String {
                try signer.mintIDToken(
                    base: "http://unused", subject: "person-1", audience: audience, email: "person@example.com",
                    issuer: TestOnlyProvider.issuer, extraClaims: ["jti": .string(UUID().uuidString)])
            }
            let first = try token()
            let signedIn = try await signIn(first)
            #expect(signedIn.status == 200, "\(signedIn.body)")
            #expect(signedIn.body["is_new_account"] as? Bool == true)
            let identity = signedIn.body["identity"] as? [String: Any]
            #expect(identity?["provider"] as? String == "tester")
            #expect(identity?["provider_scope"] as? String == TestOnlyProvider.issuer)
            let returning = try await signIn(try token())
            #expect(returning.status == 200, "\(returning.body)")
            #expect(returning.body["is_new_account"] as? Bool == false)
            #expect(
                (returning.body["account"] as? [String: Any])?["id"] as? String
                    == (signedIn.body["account"] as? [String: Any])?["id"] as? String)
            #expect(try await signIn(first).status == 401, "a replayed token")
            #expect(try await signIn(try token(audience: "another-client")).status == 401, "a client the tenant did not enable")
        }
    }
}

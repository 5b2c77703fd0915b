import AsyncHTTPClient
import Foundation
import JWTKit
import MockIdP
import NIOCore
import Storage
import Testing
import TestSupport

/// A relying party nobody here wrote (issue 42 §4): Authlib, a stock Python OAuth / OpenID
/// Connect client (Tests/Fixtures/openid-provider/authlib_client.py), against `broker serve`
/// and MockIdP's LINE issuer, with no browser: discovery, the code flow with PKCE and a nonce,
/// the ID token validated by Authlib's own JOSE code, userinfo, a refresh, a token exchange of a
/// native LINE token, and logout. The person of the code flow and of the exchange is one account.
@Suite(.serialized) struct AuthlibClientTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/openid-provider/authlib_client.py").path
    static let lineClient = "1657000001"
    static let redirectURI = "http://127.0.0.1:9/callback"
    static let postLogoutURI = "http://127.0.0.1:9/bye"

    @Test func authlibSignsInRefreshesExchangesAndLogsOut() async throws {
        let line = try MockOIDCIssuer(name: "line")
        line.registerWebClient(Self.lineClient, secret: "line-web-secret")
        let subject = "U-authlib-person"
        line.webUser = MockOIDCIssuer.WebUser(subject: subject, email: "authlib@example.com", name: "Auth Lib")
        try await ServedApplication.with({ listening in
            MockIdPServer.application(apple: nil, google: nil, facebook: nil, oidc: [line], port: 0) { listening($0) }
        }) { mockPort in
            let mock = "http://127.0.0.1:\(mockPort)"
            try await TestDatabase.withFresh { _, url in
                let port = TestPorts.next()
                let base = "http://127.0.0.1:\(port)"
                let cli = BrokerCLI(
                    databaseURL: url, extra: ["BROKER_PORT": "\(port)", "BROKER_PUBLIC_URL": base, "BROKER_LOG_LEVEL": "warning"])
                #expect(try await cli.run("tenant", "create", "acme").status == 0)
                let folder = FileManager.default.temporaryDirectory.appendingPathComponent("authlib-\(UUID().uuidString)")
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
                defer { try? FileManager.default.removeItem(at: folder) }
                let secretFile = folder.appendingPathComponent("secret.txt").path
                try "line-web-secret\n".write(toFile: secretFile, atomically: true, encoding: .utf8)
                let enabled = try await cli.run(
                    "provider", "enable", "line", "--tenant", "acme", "--type", "oidc", "--issuer", line.issuer(base: mock), "--client-id",
                    Self.lineClient, "--client-secret-file", secretFile, "--return-url", "https://shop.example.com/done", "--display-name",
                    "LINE", "--platforms", "web,android")
                try #require(enabled.status == 0, "\(enabled.output)")
                let created = try await cli.run(
                    "client", "create", "--tenant", "acme", "--name", "authlib", "--redirect-uri", Self.redirectURI,
                    "--post-logout-redirect-uri", Self.postLogoutURI, "--allow-loopback", "--json")
                try #require(created.status == 0, "\(created.output)")
                let client = try created.object()
                let clientID = try #require(client["client_id"] as? String)
                let secret = try #require(client["client_secret"] as? String)

                let readiness = try ReadinessSocket.open()
                let server = try readiness.notifying(cli).spawn(["serve"])
                defer {
                    server.signal(SIGKILL)
                    _ = try? ProcessRunner.wait(server)
                }
                try await readiness.awaitReady(server, base: base)

                // The app's native LINE sign-in gave it this token; the code flow signs the same person in.
                let native = try line.mintIDToken(
                    base: mock, subject: subject, audience: Self.lineClient, email: "authlib@example.com",
                    extraClaims: ["jti": .string(UUID().uuidString)])
                let arguments = [
                    "python3", Self.script, "\(base)/t/acme", clientID, secret, Self.redirectURI, Self.postLogoutURI, "line", native,
                ]
                let result = try await onOwnThread { try ProcessRunner.run("/usr/bin/env", arguments) }
                #expect(result.status == 0, "\(result.output)\n\(server.output.suffix(2_000))")
                let line = try #require(result.output.split(separator: "\n").last.map(String.init))
                let seen = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                #expect(seen["sub"] as? String == seen["native_sub"] as? String, "one account for the code flow and the exchange")
                #expect((seen["userinfo"] as? [String: Any])?["sub"] as? String == seen["sub"] as? String)
            }
        }
    }
}

import AsyncHTTPClient
import Foundation
import MockIdP
import NIOCore
import NIOHTTP1
import Storage
import Synchronization
import TestSupport
import Testing

/// `broker serve` at trace level, Facebook and Google sign-ins that succeed and fail: its log
/// never holds the Facebook app secret, a provider token or a full email.
@Suite(.tags(.timing)) struct ProviderSecretLogTests {
    @Test func theServerLogHoldsNoSecretTokenOrEmail() async throws {
        let secret = "s3cr3t-" + UUID().uuidString.lowercased()
        try await TestDatabase.withFresh { _, url in
            try await MockProvidersServer.with { mocks in
                let appID = "1234567890"
                mocks.facebook.registerApp(appID: appID, secret: secret)
                let port = TestPorts.next()
                let cli = BrokerCLI(
                    databaseURL: url,
                    extra: [
                        "BROKER_PORT": "\(port)", "BROKER_LOG_LEVEL": "warning", "BROKER_APPLE_BASE_URL": mocks.baseURL,
                        "BROKER_GOOGLE_JWKS_URL": MockGoogleIdP.jwksURL(base: mocks.baseURL),
                        "BROKER_FACEBOOK_JWKS_URL": MockFacebookIdP.jwksURL(base: mocks.baseURL),
                        "BROKER_FACEBOOK_GRAPH_URL": MockFacebookIdP.graphURL(base: mocks.baseURL), "BROKER_PROVIDER_TIMEOUT": "3",
                    ])
                #expect(try await cli.run("tenant", "create", "acme").status == 0)
                let created = try await cli.run("api-key", "create", "--tenant", "acme", "--json")
                let key = try #require(
                    (try JSONSerialization.jsonObject(with: Data(created.output.utf8)) as? [String: Any])?["key"] as? String)
                let secretFile = FileManager.default.temporaryDirectory.appendingPathComponent("fb-\(UUID().uuidString)").path
                try (secret + "\n").write(toFile: secretFile, atomically: true, encoding: .utf8)
                defer { try? FileManager.default.removeItem(atPath: secretFile) }
                #expect(
                    try await cli.run(
                        "provider", "enable", "facebook", "--tenant", "acme", "--app-id", appID, "--app-secret-file", secretFile,
                        "--limited-login", "--platforms", "android,web"
                    ).status == 0)
                #expect(
                    try await cli.run(
                        "provider", "enable", "google", "--tenant", "acme", "--client-id", "web.apps.googleusercontent.com", "--platforms",
                        "android,web"
                    ).status == 0)
                var tracing = cli
                tracing.environment["BROKER_LOG_LEVEL"] = "trace"
                let readiness = try ReadinessSocket.open()
                let server = try readiness.notifying(tracing).spawn(["serve"])
                defer {
                    server.signal(SIGKILL)
                    _ = try? ProcessRunner.wait(server)
                }
                let base = "http://127.0.0.1:\(port)"
                try await readiness.awaitReady(server, base: base)

                // The last answer's body, for the message of a failed expectation.
                let lastBody = Mutex("")
                func post(_ provider: String, _ body: String) async throws -> Int {
                    var request = HTTPClientRequest(url: "\(base)/v1/sign-in/\(provider)")
                    request.method = .POST
                    request.headers.add(name: "Authorization", value: "Bearer \(key)")
                    request.headers.add(name: "Content-Type", value: "application/json")
                    request.body = .bytes(ByteBuffer(string: body))
                    let response = try await HTTPClient.shared.execute(request, timeout: .seconds(15))
                    let text = String(buffer: try await response.body.collect(upTo: 65_536))
                    lastBody.withLock { $0 = text }
                    return Int(response.status.code)
                }
                let email = "logged.person@example.com"
                let good = mocks.facebook.issueAccessToken(appID: appID, userID: "10001", name: "Ada", email: email)
                #expect(try await post("facebook", #"{"access_token":"\#(good)"}"#) == 200, "\(lastBody.withLock { $0 })")
                let otherApp = mocks.facebook.issueAccessToken(appID: "5555", userID: "10002", email: email)
                #expect(try await post("facebook", #"{"access_token":"\#(otherApp)"}"#) == 401)
                mocks.facebook.meFault = .hang
                #expect(try await post("facebook", #"{"access_token":"\#(good)"}"#) == 503)
                mocks.facebook.meFault = .none
                let limited = try mocks.facebook.mint(mocks.facebook.claims(subject: "10001", appID: appID, nonce: "n1", email: email))
                #expect(try await post("facebook", #"{"limited_login_token":"\#(limited)","nonce":"n2"}"#) == 401)
                let google = try mocks.google.mint(
                    mocks.google.claims(subject: "g1", audience: "web.apps.googleusercontent.com", email: email))
                #expect(try await post("google", #"{"id_token":"\#(google)"}"#) == 200, "\(lastBody.withLock { $0 })")
                #expect(try await post("google", #"{"id_token":"\#(google)"}"#) == 401)  // replayed

                let log = server.output
                #expect(log.contains("request"), "the trace log is written")
                for (what, value) in [
                    ("app secret", secret), ("access token", good), ("other app token", otherApp),
                    ("Limited Login token", limited), ("Google token", google), ("email", email),
                ] {
                    #expect(!log.contains(value), "the log holds the \(what)")
                }
            }
        }
    }
}

import AsyncHTTPClient
import Foundation
import MockIdP
import NIOCore
import NIOHTTP1
import Storage
import TestSupport
import Testing

/// `broker serve` with `OTEL_EXPORTER_OTLP_ENDPOINT` set exports its traces to a collector on
/// loopback: a server span per request, the statements and the outbound provider call of a
/// sign-in as its children in one trace (continuing the caller's `traceparent`), and nothing
/// in any span that a log may not hold either (tokens, the app secret, a callback's code).
@Suite struct TraceExportTests {
    @Test(.timeLimit(.minutes(2))) func aSignInIsOneTraceAcrossHTTPSQLAndTheProviderCall() async throws {
        let secret = "s3cr3t-" + UUID().uuidString.lowercased()
        try await TestDatabase.withFresh { _, url in
            try await MockProvidersServer.with { mocks in
                try await TraceCollector.with { collector in
                    let appID = "4242424242"
                    mocks.facebook.registerApp(appID: appID, secret: secret)
                    let port = TestPorts.next()
                    let cli = BrokerCLI(
                        databaseURL: url,
                        extra: [
                            "BROKER_PORT": "\(port)", "BROKER_LOG_LEVEL": "warning", "BROKER_APPLE_BASE_URL": mocks.baseURL,
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
                            "--platforms", "android,web"
                        ).status == 0)

                    var traced = cli
                    traced.environment["OTEL_EXPORTER_OTLP_ENDPOINT"] = collector.endpoint
                    traced.environment["OTEL_EXPORTER_OTLP_PROTOCOL"] = "http/json"
                    traced.environment["OTEL_BSP_SCHEDULE_DELAY"] = "100"
                    let readiness = try ReadinessSocket.open()
                    let server = try readiness.notifying(traced).spawn(["serve"])
                    defer {
                        server.signal(SIGKILL)
                        _ = try? ProcessRunner.wait(server)
                    }
                    let base = "http://127.0.0.1:\(port)"
                    try await readiness.awaitReady(server, base: base)

                    // A caller already in a trace: the broker's spans continue it.
                    let callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
                    let email = "traced.person@example.com"
                    let token = mocks.facebook.issueAccessToken(appID: appID, userID: "20001", name: "Ada", email: email)
                    var request = HTTPClientRequest(url: "\(base)/v1/sign-in/facebook")
                    request.method = .POST
                    request.headers.add(name: "Authorization", value: "Bearer \(key)")
                    request.headers.add(name: "Content-Type", value: "application/json")
                    request.headers.add(name: "traceparent", value: "00-\(callerTrace)-00f067aa0ba902b7-01")
                    request.body = .bytes(ByteBuffer(string: #"{"access_token":"\#(token)"}"#))
                    let response = try await HTTPClient.shared.execute(request, timeout: .seconds(15))
                    let answer = String(buffer: try await response.body.collect(upTo: 65_536))
                    #expect(response.status == .ok, "\(answer)")
                    // The OpenID Connect callback's code and state are redacted in its span.
                    let callback = try await HTTPClient.shared.execute(
                        HTTPClientRequest(url: "\(base)/oidc/callback?code=code-\(secret)&state=state-\(secret)"), timeout: .seconds(15))
                    _ = try await callback.body.collect(upTo: 65_536)

                    let spans = await collector.spans { spans in
                        spans.contains { $0.attributes["url.path"] == "/oidc/callback" }
                            && spans.contains { $0.attributes["url.path"] == "/v1/sign-in/facebook" }
                            && spans.contains { $0.attributes["http.request.method"] == "GET" && $0.attributes["server.address"] != nil }
                            && spans.contains { $0.attributes["db.system.name"] == "postgresql" }
                    }
                    let signIn = try #require(
                        spans.first { $0.attributes["url.path"] == "/v1/sign-in/facebook" }, "spans: \(spans)")
                    #expect(Self.hex(signIn.traceID) == callerTrace, "the caller's trace is continued")
                    #expect(signIn.attributes["http.response.status_code"] == "200")
                    #expect(signIn.serviceName == "identity-broker")
                    let inTrace = spans.filter { $0.traceID == signIn.traceID }
                    let byID = Dictionary(inTrace.map { ($0.spanID, $0) }, uniquingKeysWith: { first, _ in first })
                    // Each span of the sign-in leads up to its server span.
                    func descends(_ span: TraceCollector.Span) -> Bool {
                        var current = span
                        for _ in 0..<16 {
                            if current.spanID == signIn.spanID { return true }
                            guard let parent = byID[current.parentSpanID] else { return false }
                            current = parent
                        }
                        return false
                    }
                    let statements = inTrace.filter { $0.attributes["db.system.name"] == "postgresql" }
                    #expect(!statements.isEmpty, "the sign-in's statements are in its trace: \(inTrace)")
                    #expect(statements.allSatisfy(descends), "\(statements)")
                    #expect(statements.allSatisfy { ($0.attributes["db.query.text"] ?? "").contains("$1") || $0.name == "transaction" })
                    let graph = inTrace.filter {
                        $0.attributes["server.address"] == "127.0.0.1" && $0.attributes["http.request.method"] == "GET"
                    }
                    #expect(graph.count >= 1, "the Graph call is in the sign-in's trace: \(inTrace)")
                    #expect(graph.allSatisfy(descends))
                    #expect(graph.allSatisfy { $0.attributes["url.query"] == nil && $0.attributes["url.full"] == nil })
                    #expect(collector.contentTypes.contains { $0.hasPrefix("application/json") })

                    let callbackSpan = try #require(spans.first { $0.attributes["url.path"] == "/oidc/callback" })
                    #expect(callbackSpan.attributes["url.query"]?.contains("REDACTED") == true)
                    let everything = spans.map { "\($0.name) \($0.attributes)" }.joined(separator: "\n")
                    for (what, value) in [("app secret", secret), ("access token", token), ("email", email)] {
                        #expect(!everything.contains(value), "a span holds the \(what)")
                    }
                }
            }
        }
    }

    @Test func aGRPCProtocolIsRefusedWithWhatToSet() async throws {
        try await TestDatabase.withFresh { _, url in
            var cli = BrokerCLI(databaseURL: url, extra: ["BROKER_PORT": "\(TestPorts.next())"])
            cli.environment["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:4317"
            cli.environment["OTEL_EXPORTER_OTLP_PROTOCOL"] = "grpc"
            let result = try await cli.run("serve")
            #expect(result.status != 0)
            #expect(result.output.contains("OTEL_EXPORTER_OTLP_PROTOCOL"), "\(result.output)")
            #expect(result.output.contains("http/protobuf"))
        }
    }

    /// A trace id as lowercase hex, whether the export wrote it as hex (OTLP/JSON) or base64.
    static func hex(_ id: String) -> String {
        if id.count == 32, id.allSatisfy(\.isHexDigit) { return id.lowercased() }
        guard let bytes = Data(base64Encoded: id) else { return id }
        return bytes.map { String(format: "%02x", $0) }.joined()
    }
}

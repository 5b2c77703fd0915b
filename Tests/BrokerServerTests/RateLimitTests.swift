import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Storage
import Synchronization
import TestSupport
import Testing

@testable import BrokerApplication
@testable import BrokerServer

/// Abuse limits (issue 25, decision 0048): per API key, per client address on the public routes,
/// refused keys from one address, on a clock the test moves (no test waits for a bucket to fill).
@Suite struct RateLimitTests {
    final class Clock: Sendable {
        let seconds = Mutex(1_000.0)
        func advance(_ by: Double) { seconds.withLock { $0 += by } }
        var read: @Sendable () -> Double { { self.seconds.withLock { $0 } } }
    }

    static func limits(
        apiKey: RateLimit = AbuseLimits.defaultAPIKey, publicRoutes: RateLimit = AbuseLimits.defaultPublicRoutes,
        failures: RateLimit = AbuseLimits.defaultFailedAuthentication, trusted: String = ""
    ) throws -> AbuseLimits {
        AbuseLimits(
            apiKey: apiKey, publicRoutes: publicRoutes, failedAuthentication: failures,
            clientAddresses: ClientAddressResolver(trustedProxies: try ClientAddressResolver.parse(trusted).get()))
    }

    @Test func anAPIKeyOverItsRateGets429WithRetryAfterAndItsTenantCanRaiseIt() async throws {
        let clock = Clock()
        try await TestApp.run(abuseLimits: try Self.limits(apiKey: RateLimit(perSecond: 1, burst: 3)), rateLimitClock: clock.read) {
            app, client in
            _ = try await app.createTenant("acme")
            let key = try await app.createKey("acme")
            let other = try await app.createKey("acme")
            for _ in 0..<3 { #expect(try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(key)).status == .ok) }
            let limited = try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(key))
            #expect(limited.status == .tooManyRequests)
            #expect(limited.problemCode == "rate_limited")
            #expect(limited.headers[.retryAfter] == "1")
            #expect(limited.headers[.contentType] == "application/problem+json")
            #expect(
                try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(other)).status == .ok,
                "each key has its own bucket")

            clock.advance(1)
            #expect(try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(key)).status == .ok)
            #expect(try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(key)).status == .tooManyRequests)

            // The tenant's own rate replaces the instance's, on every instance: the change clears
            // the cached key through LISTEN/NOTIFY. A bucket keeps its tokens; it refills at the new rate.
            let hash = try #require(APIKeyToken(parsing: key)).hash
            _ = try await TenantAdmin(database: app.database, actor: "test").setRateLimit("acme", RateLimit(perSecond: 50, burst: 50))
            #expect(try await eventually { app.services.callers.value(for: hash) == nil })
            #expect(try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(key)).status == .tooManyRequests)
            clock.advance(1)
            for _ in 0..<50 { #expect(try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(key)).status == .ok) }
            #expect(try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(key)).status == .tooManyRequests)
            let tenant = try #require(try await app.database.tenants.find(slug: "acme"))
            #expect(tenant.rateLimit == RateLimit(perSecond: 50, burst: 50))
            let back = try await TenantAdmin(database: app.database, actor: "test").setRateLimit("acme", nil)
            #expect(back.rateLimit == nil)

            // Counted in the metrics.
            let metrics = try await client.execute(uri: "/metrics", method: .get)
            #expect(String(buffer: metrics.body).contains(#"broker_rate_limited_total{limit="api_key"}"#))
        }
    }

    @Test func badRatesAreRefusedAndChangeNothing() async throws {
        try await TestApp.run { app, _ in
            _ = try await app.createTenant("acme")
            let admin = TenantAdmin(database: app.database, actor: "test")
            for bad in [
                RateLimit(perSecond: 0, burst: 1), RateLimit(perSecond: 10, burst: 5), RateLimit(perSecond: 2_000_000, burst: 2_000_000),
            ] {
                await #expect(throws: BrokerError.self) { try await admin.setRateLimit("acme", bad) }
            }
            await #expect(throws: BrokerError.tenantNotFound("nobody")) {
                try await admin.setRateLimit("nobody", RateLimit(perSecond: 1, burst: 1))
            }
            #expect(try await app.database.tenants.find(slug: "acme")?.rateLimit == nil)
        }
    }

    @Test func refusedKeysFromOneAddressAreSlowedWithoutReachingTheDatabase() async throws {
        let clock = Clock()
        try await TestApp.run(
            mode: .live, abuseLimits: try Self.limits(failures: RateLimit(perSecond: 1, burst: 3)), rateLimitClock: clock.read
        ) { app, client in
            _ = try await app.createTenant("acme")
            let key = try await app.createKey("acme")
            #expect(try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(key)).status == .ok)
            let guess = "not-a-key"
            let unknown = try #require(APIKeyToken(parsing: String(key.dropLast(4)) + (key.hasSuffix("AAAA") ? "BBBB" : "AAAA")))
            for header: HTTPFields in [bearer(unknown.value), bearer(guess), [:]] {
                #expect(try await client.execute(uri: "/v1/tenant", method: .get, headers: header).status == .unauthorized)
            }
            #expect(app.services.unknownKeys.value(for: unknown.hash) == true, "an unknown well-formed key is remembered as such")
            let slowed = try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(unknown.value))
            #expect(slowed.status == .tooManyRequests)
            #expect(slowed.problemCode == "rate_limited")
            #expect(try await client.execute(uri: "/v1/tenant", method: .get, headers: [:]).status == .tooManyRequests)
            // The key this instance knows still works from that address.
            #expect(try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(key)).status == .ok)
            // Also once its cache entry expired, while junk keys keep the budget spent (issue
            // 39 B6: its re-check met the budget and was answered 429).
            clock.advance(6)
            #expect(app.services.callers.value(for: try #require(APIKeyToken(parsing: key)).hash) == nil, "the entry expired")
            for _ in 0..<5 { _ = try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(unknown.value)) }
            #expect(try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(unknown.value)).status == .tooManyRequests)
            #expect(try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(key)).status == .ok)
            #expect(try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(unknown.value)).status == .tooManyRequests)
            clock.advance(1)
            #expect(try await client.execute(uri: "/v1/tenant", method: .get, headers: [:]).status == .unauthorized)
        }
    }

    @Test func publicRoutesAreLimitedPerClientAddressBehindTrustedProxies() async throws {
        let clock = Clock()
        let limits = try Self.limits(publicRoutes: RateLimit(perSecond: 1, burst: 2), trusted: "127.0.0.1/32")
        try await TestApp.run(mode: .live, abuseLimits: limits, rateLimitClock: clock.read) { app, client in
            _ = try await app.createTenant("acme")
            let key = try await app.createKey("acme")
            let jwks = "/t/acme/.well-known/jwks.json"
            func get(_ uri: String, from address: String, _ extra: HTTPFields = [:]) async throws -> TestResponse {
                var headers = extra
                headers[.xForwardedFor] = address
                return try await client.execute(uri: uri, method: .get, headers: headers)
            }
            #expect(try await get(jwks, from: "203.0.113.1").status == .ok)
            #expect(try await get("/t/acme/.well-known/openid-configuration", from: "203.0.113.1").status == .ok)
            let limited = try await get(jwks, from: "203.0.113.1")
            #expect(limited.status == .tooManyRequests)
            #expect(limited.headers[.retryAfter] == "1")
            #expect(try await get(jwks, from: "203.0.113.2").status == .ok, "another client behind the proxy")
            #expect(try await get("/healthz", from: "203.0.113.1").status == .ok, "health is not a public route")
            for _ in 0..<5 {
                #expect(try await get("/v1/tenant", from: "203.0.113.1", bearer(key)).status == .ok, "API routes are limited per key")
            }
            let notification = try await client.execute(
                uri: "/apple/notifications", method: .post, headers: [.contentType: "application/json", .xForwardedFor: "203.0.113.1"],
                body: ByteBuffer(string: #"{"payload":"x"}"#))
            #expect(notification.status == .tooManyRequests, "Apple's notifications are a public route")
            clock.advance(1)
            #expect(try await get(jwks, from: "203.0.113.1").status == .ok)
            let metrics = try await client.execute(uri: "/metrics", method: .get)
            #expect(String(buffer: metrics.body).contains(#"broker_rate_limited_total{limit="public_ip"}"#))
        }
    }

    /// The OpenID Provider's endpoints share the public per-address bucket, and refuse in their
    /// own forms: a page where a browser stands, RFC 6749 JSON where an OAuth client does; a
    /// refused request reaches no route (nothing is read or written).
    @Test func theOpenIDProviderEndpointsAreLimitedInTheirOwnForms() async throws {
        let clock = Clock()
        let limits = try Self.limits(publicRoutes: RateLimit(perSecond: 1, burst: 1), trusted: "127.0.0.1/32")
        try await TestApp.run(mode: .live, abuseLimits: limits, rateLimitClock: clock.read) { app, client in
            _ = try await app.createTenant("acme")
            func send(_ uri: String, _ method: HTTPRequest.Method, from address: String, form: String? = nil) async throws
                -> TestResponse
            {
                var headers: HTTPFields = [.xForwardedFor: address]
                if form != nil { headers[.contentType] = "application/x-www-form-urlencoded" }
                return try await client.execute(uri: uri, method: method, headers: headers, body: form.map { ByteBuffer(string: $0) })
            }
            let token = { (address: String) in
                try await send("/t/acme/token", .post, from: address, form: "grant_type=authorization_code&code=x&client_id=c")
            }
            #expect(try await token("203.0.113.7").status == .unauthorized, "the first is the route's own answer")
            for (uri, method) in [("/t/acme/token", HTTPRequest.Method.post), ("/t/acme/userinfo", .get)] {
                let refused = try await send(uri, method, from: "203.0.113.7", form: method == .post ? "grant_type=refresh_token" : nil)
                #expect(refused.status == .tooManyRequests, "\(uri)")
                #expect(refused.headers[.retryAfter] == "1")
                #expect(refused.headers[.contentType]?.hasPrefix("application/json") == true)
                let body = try refused.json()
                #expect(body["error"] as? String == "temporarily_unavailable", "\(uri): \(String(buffer: refused.body))")
            }
            for uri in ["/t/acme/authorize?response_type=code&client_id=c", "/t/acme/logout"] {
                let page = try await send(uri, .get, from: "203.0.113.7")
                #expect(page.status == .tooManyRequests, "\(uri)")
                #expect(page.headers[.retryAfter] == "1")
                #expect(page.headers[.contentType]?.hasPrefix("text/html") == true)
                #expect(page.headers[.location] == nil, "never a redirect")
                #expect(String(buffer: page.body).contains("rate_limited"))
            }
            #expect(try await token("203.0.113.8").status == .unauthorized, "another address has its own bucket")
            clock.advance(1)
            #expect(try await token("203.0.113.7").status == .unauthorized, "and the bucket fills again")
            let metrics = try await client.execute(uri: "/metrics", method: .get)
            #expect(String(buffer: metrics.body).contains(#"broker_rate_limited_total{limit="public_ip"}"#))
        }
    }

    @Test func everyAnswerCarriesTheEdgeHeadersAndOnlyDiscoveryAllowsOtherOrigins() async throws {
        try await TestApp.run { app, client in
            _ = try await app.createTenant("acme")
            let key = try await app.createKey("acme")
            for uri in ["/healthz", "/v1/tenant", "/nowhere"] {
                let response = try await client.execute(uri: uri, method: .get, headers: uri == "/v1/tenant" ? bearer(key) : [:])
                #expect(response.headers[.xContentTypeOptions] == "nosniff", "\(uri)")
                #expect(response.headers[.referrerPolicy] == "no-referrer", "\(uri)")
                #expect(response.headers[.strictTransportSecurity]?.hasPrefix("max-age=") == true, "https public URL: \(uri)")
                #expect(response.headers[.accessControlAllowOrigin] == nil, "\(uri)")
            }
            for uri in ["/t/acme/.well-known/jwks.json", "/t/acme/.well-known/openid-configuration"] {
                #expect(try await client.execute(uri: uri, method: .get).headers[.accessControlAllowOrigin] == "*")
            }
        }
        var plain: HTTPFields = [:]
        EdgeHeadersMiddleware.decorate(&plain, path: "/healthz", https: false)
        #expect(plain[.strictTransportSecurity] == nil, "no HSTS over plain http")
        var page: HTTPFields = [.referrerPolicy: "same-origin"]
        EdgeHeadersMiddleware.decorate(&page, path: "/apple/callback", https: true)
        #expect(page[.referrerPolicy] == "same-origin", "a route's own policy is kept")
    }

    @Test func connectionsPerAddressAreCappedAndHalfSentHeadsClosed() async throws {
        let limits = HTTPLimits(maxConnectionsPerAddress: 4, headerTimeout: .seconds(5))
        try await TestApp.run(mode: .live, httpLimits: limits) { _, client in
            let port = try #require(client.port)
            // Four connections from 127.0.0.2 that send half a head; the fifth's request is
            // answered 503 with Retry-After and the connection closed (issue 39 F18: it was
            // closed unanswered), before the header timeout could close anything.
            let held = try (0..<4).map { _ in try RawConnection(port: port, from: "127.0.0.2") }
            for connection in held { connection.send("GET /healthz HTTP/1.1\r\nHo") }
            let fifth = try RawConnection(port: port, from: "127.0.0.2")
            fifth.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let refused = await fifth.readUntilClosed(timeoutSeconds: 30)
            // Under a full run's load the server can accept the fifth connection before one of
            // the held ones (accept order is not open order); that held one is then the one
            // over the cap, and the fifth is served. Seen in CI; the answer is checked otherwise.
            if !refused.answer.hasPrefix("HTTP/1.1 200") {
                #expect(refused.closed && refused.answer.hasPrefix("HTTP/1.1 503"), "\(refused.answer.prefix(300))")
                #expect(refused.answer.lowercased().contains("retry-after: 1") && refused.answer.lowercased().contains("connection: close"))
                #expect(refused.answer.contains("\"code\":\"connection_limit\""))
            }
            // Another address is served meanwhile (on a connection of its own: the test client's,
            // opened before and idle for longer than the header timeout, is closed by now).
            let other = try RawConnection(port: port, from: "127.0.0.1")
            other.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            #expect(await other.readUntilClosed(timeoutSeconds: 30).answer.hasPrefix("HTTP/1.1 200"))
            // The half-sent heads are closed by the header timeout (5 s here, long enough that they
            // are still open when the fifth connection is answered on a loaded machine), unanswered.
            for connection in held {
                let closed = await connection.readUntilClosed(timeoutSeconds: 30)
                #expect(closed.closed)
            }
            // A whole request is answered.
            let whole = try RawConnection(port: port, from: "127.0.0.2")
            whole.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            let answered = await whole.readUntilClosed(timeoutSeconds: 30)
            #expect(answered.answer.hasPrefix("HTTP/1.1 200"), "\(answered.answer.prefix(40))")
        }
    }

    @Test func connectionCountsFreeTheirPlaceAndSkipTrustedProxies() throws {
        let counts = ConnectionCounts(
            cap: 2, resolver: ClientAddressResolver(trustedProxies: try ClientAddressResolver.parse("10.0.0.0/8").get()))
        let client = try #require(IPAddress("203.0.113.1"))
        #expect(counts.open(client) && counts.open(client))
        #expect(!counts.open(client))
        counts.close(client)
        #expect(counts.open(client))
        let proxy = try #require(IPAddress("10.0.0.1"))
        for _ in 0..<10 { #expect(counts.open(proxy)) }
        #expect(counts.held(by: proxy) == 0)
    }

    @Test func metricsMoveToTheirOwnListenerWhenAPortIsSet() async throws {
        try await TestApp.run(metricsElsewhere: true) { app, client in
            let hidden = try await client.execute(uri: "/metrics", method: .get)
            #expect(hidden.status == .notFound)
            #expect(hidden.problemCode == "not_found")
            #expect(try await client.execute(uri: "/healthz", method: .get).status == .ok)
            let metrics = buildMetricsApplication(services: app.services, host: "127.0.0.1", port: 0, logger: TestDatabase.logger)
            try await metrics.test(.live) { metricsClient in
                let shown = try await metricsClient.execute(uri: "/metrics", method: .get)
                #expect(shown.status == .ok)
                #expect(String(buffer: shown.body).contains("broker_provider_keys_usable"))
                #expect(try await metricsClient.execute(uri: "/v1/tenant", method: .get).status == .notFound, "nothing else on that port")
            }
        }
        #expect(try BrokerConfiguration(environment: ["BROKER_METRICS_PORT": "9090"]).metricsPort == 9090)
        #expect(try BrokerConfiguration(environment: [:]).metricsPort == nil)
        #expect(throws: BrokerError.self) { try BrokerConfiguration(environment: ["BROKER_METRICS_PORT": "8080"]) }
        #expect(throws: BrokerError.self) { try BrokerConfiguration(environment: ["BROKER_METRICS_PORT": "http"]) }
    }

    @Test func aKeysLastUseIsStampedAtMostOnceAMinute() async throws {
        try await TestApp.run { app, client in
            let tenant = try await app.createTenant("acme")
            let key = try await app.createKey("acme")
            #expect(try await app.database.apiKeys.list(tenantID: tenant.id).first?.lastUsedAt == nil)
            #expect(try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(key)).status == .ok)
            #expect(try await eventually { try await app.database.apiKeys.list(tenantID: tenant.id).first?.lastUsedAt != nil })
            let first = try await app.database.apiKeys.list(tenantID: tenant.id).first?.lastUsedAt
            for _ in 0..<5 { #expect(try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(key)).status == .ok) }
            #expect(
                try await app.database.apiKeys.list(tenantID: tenant.id).first?.lastUsedAt == first, "not stamped again within the minute")
        }
    }
}

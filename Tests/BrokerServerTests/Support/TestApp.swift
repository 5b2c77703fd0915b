import BrokerCore
import BrokerApplication
import BrokerServer
import Foundation
import Synchronization
import Logging
import Providers
import HTTPTypes
import NIOCore
import Hummingbird
import HummingbirdTesting
import Storage
import TestSupport

/// A broker application on a fresh database, exercised through HummingbirdTesting.
struct TestApp {
    static let publicURL = "https://id.example.com"

    let database: Database
    let databaseURL: String
    /// The services the application runs on (its security event recorder, for tests that wait on it).
    let services: BrokerServices
    /// The background workers `broker serve` runs, as the test app runs them: a test stops
    /// them as a graceful shutdown does, and waits for them.
    let workers: Workers

    final class Workers: Sendable {
        let stop = GracefulStop()
        private let task = Mutex<Task<Void, Never>?>(nil)

        func start(_ services: BrokerServices) {
            let stop = stop
            task.withLock { $0 = Task { await services.backgroundTasks(stop: stop) } }
        }

        /// Cancels them (a stop's drain that ran out).
        func cancel() { task.withLock { $0 }?.cancel() }

        /// Returns once they have all returned.
        func finished() async { await task.withLock { $0 }?.value }
    }
    var secrets: SecretBox { TestDatabase.secrets }

    /// `mode`: `.router` calls the router directly; `.live` serves on a loopback port (for what
    /// happens below the router: HTTP parsing, connection handling). `providerTimeoutSeconds`:
    /// `BROKER_PROVIDER_TIMEOUT`, when `endpoints` is not given.
    static func run(
        appleBaseURL: String = "http://127.0.0.1:9", endpoints: ProviderEndpoints? = nil, providerTimeoutSeconds: Int = 10,
        mode: TestingSetup = .router,
        securityEvents: SecurityEventSampling = SecurityEventSampling(),
        abuseLimits: AbuseLimits = AbuseLimits(), httpLimits: HTTPLimits = HTTPLimits(), metricsElsewhere: Bool = false,
        rateLimitClock: @escaping @Sendable () -> Double = TokenBucketClock.monotonicSeconds, logger: Logger = TestDatabase.logger,
        _ test: @Sendable @escaping (TestApp, any TestClientProtocol) async throws -> Void
    ) async throws {
        // The application runs as the role broker serve runs as (the tenant wall applies);
        // the test's own setup and checks use the superuser's connection.
        try await TestDatabase.withFreshServing { database, serving, url in
            let services = BrokerServices(
                database: serving, secrets: TestDatabase.secrets, publicURL: publicURL, maxBodyBytes: 32_768,
                appleBaseURL: endpoints?.appleBaseURL ?? appleBaseURL,
                endpoints: endpoints
                    ?? ProviderEndpoints(
                        appleBaseURL: appleBaseURL, googleKeysURL: "http://127.0.0.1:9/google",
                        facebookGraphURL: "http://127.0.0.1:9/graph",
                        facebookKeysURL: "http://127.0.0.1:9/facebook", timeoutSeconds: providerTimeoutSeconds),
                securityEventSampling: securityEvents, webhookAllowInsecure: true, abuseLimits: abuseLimits,
                rateLimitClock: rateLimitClock)
            let app = try buildApplication(
                services: services, host: "127.0.0.1", port: 0, limits: httpLimits, metricsElsewhere: metricsElsewhere,
                logger: logger)
            let testApp = TestApp(database: database, databaseURL: url, services: services, workers: Workers())
            // The LISTEN/NOTIFY cache invalidation and key refresh, as `broker serve` runs them.
            testApp.workers.start(services)
            defer { testApp.workers.cancel() }
            try await app.test(mode) { client in try await test(testApp, client) }
        }
    }

    func createTenant(_ slug: String) async throws -> Tenant {
        try await TenantAdmin(database: database, actor: "test").create(slug: slug, name: nil, secrets: secrets)
    }

    func createKey(_ slug: String) async throws -> String {
        try await APIKeyAdmin(database: database, actor: "test").create(tenant: slug, name: "test", scopes: []).key
    }

    var keys: SigningKeyAdmin { SigningKeyAdmin(database: database, secrets: secrets, actor: "test") }
}

extension TestResponse {
    func json() throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(body.readableBytesView))
        guard let dictionary = object as? [String: Any] else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "not an object"))
        }
        return dictionary
    }

    var problemCode: String? { (try? json())?["code"] as? String }
}

func bearer(_ key: String) -> HTTPFields { [.authorization: "Bearer \(key)"] }

/// The claims of a compact JWT, unverified (what a test reads from a token it was given).
func jwtClaims(_ jwt: String) throws -> [String: Any] {
    let parts = jwt.split(separator: ".")
    guard parts.count == 3, let data = Base64URL.decode(String(parts[1])) else { return [:] }
    return try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
}

/// Polls `condition` until it holds (changes reach caches through LISTEN/NOTIFY, a few
/// milliseconds after commit); false after `timeout`.
func eventually(timeout: Duration = .seconds(3), _ condition: () async throws -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}

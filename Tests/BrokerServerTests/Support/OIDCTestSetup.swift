import BrokerCore
import BrokerApplication
import BrokerServer
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JWTKit
import MockIdP
import NIOCore
import NIOCore
import PostgresNIO
import Providers
import Storage
import TestSupport

/// Generic OpenID Connect providers against MockIdP on loopback: a `line`-like issuer, a
/// `yahoo`-like one and a multi-tenant `entra`-like one (``MockOIDCIssuer``), and a broker
/// built like ``TestApp`` (with any `additional` provider types registered). Tenants `acme`,
/// `bravo` and `plain` with an API key each and no provider; unless `enableLine` is false,
/// acme has `line` (type oidc, discovered, client ``lineClient``, display name LINE) offered
/// on web and android (no guideline 4.8 question: neither is an App Store platform), with
/// `lineValues` added to its settings.
struct OIDCTestSetup {
    static let lineClient = "1657000001"
    static let bravoLineClient = "1657000002"
    static let yahooClient = "dj00yahoo-client"
    static let entraClient = "8c1f2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f"
    static let entraTenant = "3c9a1f52-7d4e-4b8a-9f60-1e2d3c4b5a69"
    static let otherEntraTenant = "77777777-1111-4222-8333-444444444444"

    let app: TestApp
    let client: any TestClientProtocol
    let line: MockOIDCIssuer
    let yahoo: MockOIDCIssuer
    let entra: MockOIDCIssuer
    /// MockIdP's base URL, `http://127.0.0.1:<port>`.
    let base: String
    let keys: [String: String]
    /// The registry the admin configures with (the built-ins and `additional`).
    let registry: ProviderRegistry

    var admin: ProviderAdmin { ProviderAdmin(database: app.database, actor: "test") }
    var lineIssuer: String { line.issuer(base: base) }
    var yahooIssuer: String { yahoo.issuer(base: base) }
    /// The `{tid}` template.
    var entraIssuer: String { entra.issuer(base: base) }

    static func run(
        additional: [ProviderDescriptor] = [], enableLine: Bool = true, lineValues: [String: [String]] = [:],
        _ test: @Sendable @escaping (OIDCTestSetup) async throws -> Void
    ) async throws {
        let line = try MockOIDCIssuer(name: "line")
        let yahoo = try MockOIDCIssuer(name: "yahoo")
        let entra = try MockOIDCIssuer(name: "entra", multiTenant: true)
        try await ServedApplication.with({ listening in
            MockIdPServer.application(apple: nil, google: nil, facebook: nil, oidc: [line, yahoo, entra], port: 0) { port in
                listening(port)
            }
        }) { port in
            let base = "http://127.0.0.1:\(port)"
            // Nothing else listens where the built-ins would be reached: these tests never need them.
            let endpoints = ProviderEndpoints(
                appleBaseURL: "http://127.0.0.1:9", googleKeysURL: "http://127.0.0.1:9/google",
                facebookGraphURL: "http://127.0.0.1:9/graph",
                facebookKeysURL: "http://127.0.0.1:9/facebook", timeoutSeconds: 5)
            try await TestDatabase.withFresh { database, url in
                let services = BrokerServices(
                    database: database, secrets: TestDatabase.secrets, publicURL: TestApp.publicURL, maxBodyBytes: 32_768,
                    endpoints: endpoints, additionalProviderTypes: additional)
                let application = try buildApplication(services: services, host: "127.0.0.1", port: 0, logger: TestDatabase.logger)
                let app = TestApp(database: database, databaseURL: url, services: services, workers: TestApp.Workers())
                // The LISTEN/NOTIFY cache invalidation and key refresh, as `broker serve` runs them.
                app.workers.start(services)
                defer { app.workers.cancel() }
                var keys: [String: String] = [:]
                for slug in ["acme", "bravo", "plain"] {
                    _ = try await app.createTenant(slug)
                    keys[slug] = try await app.createKey(slug)
                }
                let registry = ProviderAdmin.registry(secrets: app.secrets, endpoints: endpoints, additional: additional)
                if enableLine {
                    var values: [String: [String]] = [
                        "issuer": [line.issuer(base: base)], "client-id": [lineClient], "display-name": ["LINE"],
                    ]
                    values.merge(lineValues) { $1 }
                    _ = try await ProviderAdmin(database: database, actor: "test").enable(
                        tenant: "acme", provider: "line", type: "oidc", platforms: [.web, .android], values: values, registry: registry)
                }
                let tenantKeys = keys
                try await application.test(.router) { client in
                    try await test(
                        OIDCTestSetup(
                            app: app, client: client, line: line, yahoo: yahoo, entra: entra, base: base, keys: tenantKeys,
                            registry: registry))
                }
            }
        }
    }

    /// Enables an OIDC provider `id` of `tenant` through the admin, with discovery.
    @discardableResult
    func enable(
        _ id: String, issuer: String, clientIDs: [String], tenant: String = "acme", platforms: [ProviderPlatform] = [.web, .android],
        extra: [String: [String]] = [:], force: Bool = false
    ) async throws -> ProviderAdmin.Status {
        var values: [String: [String]] = ["issuer": [issuer], "client-id": clientIDs]
        values.merge(extra) { $1 }
        return try await admin.enable(
            tenant: tenant, provider: id, type: "oidc", platforms: platforms, values: values, registry: registry, force: force)
    }

    /// An id token of `issuer` (line unless told) for `subject`, with a fresh `jti` (so that two
    /// tokens minted in one second are two tokens, not a replay).
    func token(
        _ issuer: MockOIDCIssuer? = nil, subject: String, audience: String = lineClient, tenant: String? = nil, nonce: String? = nil,
        email: String? = nil, emailVerified: Bool? = true, iss: String? = nil, lifetime: TimeInterval = 3600,
        extra: [String: JWTHeaderField] = [:], algorithm: MockOIDCIssuer.Algorithm? = nil, header: [String: JWTHeaderField] = [:],
        forgery: TokenForgery = .valid
    ) throws -> String {
        try (issuer ?? line).mintIDToken(
            base: base, subject: subject, audience: audience, tenant: tenant, nonce: nonce, email: email, emailVerified: emailVerified,
            issuer: iss, lifetime: lifetime, extraClaims: ["jti": .string(UUID().uuidString)].merging(extra) { $1 },
            algorithm: algorithm, header: header, forgery: forgery)
    }

    @discardableResult
    func post(_ path: String, json: [String: Any], tenant: String = "acme", accountToken: String? = nil) async throws -> TestResponse {
        var headers: HTTPFields = [.authorization: "Bearer \(keys[tenant] ?? "")", .contentType: "application/json"]
        if let accountToken { headers[LinkingRequests.accountToken] = accountToken }
        return try await client.execute(
            uri: path, method: .post, headers: headers, body: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: json)))
    }

    func get(_ uri: String, tenant: String = "acme") async throws -> TestResponse {
        try await client.execute(uri: uri, method: .get, headers: bearer(keys[tenant] ?? ""))
    }

    func delete(_ uri: String, tenant: String = "acme", accountToken: String) async throws -> TestResponse {
        var headers: HTTPFields = [.authorization: "Bearer \(keys[tenant] ?? "")"]
        headers[LinkingRequests.accountToken] = accountToken
        return try await client.execute(uri: uri, method: .delete, headers: headers)
    }

    /// Signs in through `provider` and expects 200; the body.
    func signIn(_ provider: String, _ body: [String: Any], tenant: String = "acme") async throws -> [String: Any] {
        let response = try await post("/v1/sign-in/\(provider)", json: body, tenant: tenant)
        guard response.status == .ok else {
            throw SignInRefused(status: response.status.code, body: String(buffer: response.body))
        }
        return try response.json()
    }

    struct SignInRefused: Error, CustomStringConvertible {
        let status: Int
        let body: String
        var description: String { "sign-in answered \(status): \(body)" }
    }

    /// The providers of the identities of `account`.
    func identityProviders(of account: String, tenant: String = "acme") async throws -> [String] {
        let identities = try await get("/v1/accounts/\(account)", tenant: tenant).json()["identities"] as? [[String: Any]] ?? []
        return identities.compactMap { $0["provider"] as? String }.sorted()
    }

    func count(_ table: String) async throws -> Int {
        let rows = try await app.database.client.query(PostgresQuery(unsafeSQL: "SELECT count(*)::int8 FROM \(table)"))
        var count = 0
        for try await value in rows.decode(Int.self) { count = value }
        return count
    }

    func tenantID(_ slug: String) async throws -> UUID {
        guard let tenant = try await app.database.tenants.find(slug: slug) else { throw BrokerError.tenantNotFound(slug) }
        return tenant.id
    }

    /// The stored configuration of `id` in `tenant`.
    func stored(_ id: String, tenant: String = "acme") async throws -> ProviderConfiguration? {
        guard let provider = ProviderID(rawValue: id) else { return nil }
        return try await app.database.providerConfigs.find(tenantID: try await tenantID(tenant), provider: provider)
    }
}

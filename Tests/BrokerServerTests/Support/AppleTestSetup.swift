import BrokerCore
import BrokerApplication
import BrokerServer
import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import MockIdP
import NIOCore
import PostgresNIO
import Storage
import TestSupport

/// A tenant wired to a MockIdP on loopback: team TEAM000001 with a .p8 the mock checks client
/// secrets against, group com.acme.app with clients com.acme.app (app, sha256 nonce),
/// com.acme.app.widget (app), com.acme.raw (app, raw nonce) and com.acme.web (service), none
/// requiring a nonce, and com.acme.strict (app, sha256 nonce, required).
struct AppleTestSetup {
    static let teamID = "TEAM000001"
    static let keyID = "KEY0000001"

    let app: TestApp
    let client: any TestClientProtocol
    let apple: MockAppleIdP
    let apiKey: String
    let tenant: Tenant

    /// `prepare` runs before the broker starts (to start it against a misbehaving Apple).
    /// `providerTimeoutSeconds`: `BROKER_PROVIDER_TIMEOUT`.
    static func run(
        prepare: @Sendable (MockAppleIdP) -> Void = { _ in }, securityEvents: SecurityEventSampling = SecurityEventSampling(),
        providerTimeoutSeconds: Int = 10, abuseLimits: AbuseLimits = AbuseLimits(), httpLimits: HTTPLimits = HTTPLimits(),
        _ test: @Sendable @escaping (AppleTestSetup) async throws -> Void
    ) async throws {
        try await MockAppleServer.with { apple, baseURL in
            prepare(apple)
            let timeout = providerTimeoutSeconds
            try await TestApp.run(
                appleBaseURL: baseURL, providerTimeoutSeconds: timeout, securityEvents: securityEvents, abuseLimits: abuseLimits,
                httpLimits: httpLimits
            ) { app, client in
                let tenant = try await app.createTenant("acme")
                let apiKey = try await app.createKey("acme")
                let p8 = P256.Signing.PrivateKey()
                apple.registerTeam(teamID, keyID: keyID, publicKey: p8.publicKey)
                let admin = AppleAdmin(database: app.database, actor: "test")
                _ = try await admin.setTeam(
                    tenant: "acme", teamID: teamID, keyID: keyID, p8PEM: p8.pemRepresentation, secrets: app.secrets)
                _ = try await admin.addGroup(tenant: "acme", primaryAppID: "com.acme.app", nonceRequired: false)
                _ = try await admin.addClient(
                    tenant: "acme", group: "com.acme.app", clientID: "com.acme.app.widget", kind: .app, nonceMode: .sha256,
                    redirectURIs: [], returnURLs: [], nonceRequired: false)
                _ = try await admin.addClient(
                    tenant: "acme", group: "com.acme.app", clientID: "com.acme.raw", kind: .app, nonceMode: .raw,
                    redirectURIs: [], returnURLs: [], nonceRequired: false)
                _ = try await admin.addClient(
                    tenant: "acme", group: "com.acme.app", clientID: "com.acme.web", kind: .service, nonceMode: .sha256,
                    redirectURIs: ["https://acme.example.com/apple/callback"], returnURLs: ["https://acme.example.com/done"],
                    nonceRequired: false)
                _ = try await admin.addClient(
                    tenant: "acme", group: "com.acme.app", clientID: "com.acme.strict", kind: .app, nonceMode: .sha256,
                    redirectURIs: [], returnURLs: [])
                try await test(AppleTestSetup(app: app, client: client, apple: apple, apiKey: apiKey, tenant: tenant))
            }
        }
    }

    static func sha256Hex(_ value: String) -> String {
        SHA256.hash(data: Data(value.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// A valid Apple identity token for `subject` through `clientID`.
    func token(
        subject: String, clientID: String = "com.acme.app", nonce: String? = nil, email: String? = "person@example.com",
        isPrivateEmail: Bool = false, issuedAt: Date = Date(), extra: [String: JWTHeaderField] = [:]
    ) throws -> String {
        try apple.mint(
            apple.claims(
                subject: subject, audience: clientID, nonce: nonce, email: email, isPrivateEmail: isPrivateEmail,
                issuedAt: issuedAt, extra: extra))
    }

    @discardableResult
    func post(_ path: String, json: [String: Any], key: String? = nil) async throws -> TestResponse {
        let body = try JSONSerialization.data(withJSONObject: json)
        return try await client.execute(
            uri: path, method: .post,
            headers: [.authorization: "Bearer \(key ?? apiKey)", .contentType: "application/json"],
            body: ByteBuffer(bytes: body))
    }

    func postForm(_ path: String, _ form: String, key: String? = nil) async throws -> TestResponse {
        try await client.execute(
            uri: path, method: .post,
            headers: [.authorization: "Bearer \(key ?? apiKey)", .contentType: "application/x-www-form-urlencoded"],
            body: ByteBuffer(string: form))
    }

    /// Signs in and returns the response body.
    func signIn(_ body: [String: Any]) async throws -> [String: Any] {
        let response = try await post("/v1/sign-in/apple", json: body)
        guard response.status == .ok else {
            throw SignInFailed(status: response.status.code, body: String(buffer: response.body))
        }
        return try response.json()
    }

    /// Moves every spent refresh token's `used_at` back by `seconds`: as if the reuse interval
    /// had passed since their rotation.
    func ageSpentRefreshTokens(by seconds: Int) async throws {
        try await app.database.client.query(
            "UPDATE refresh_tokens SET used_at = used_at - make_interval(secs => \(Double(seconds))) WHERE tenant_id = \(tenant.id)")
    }

    /// Sessions of the tenant that are neither revoked nor expired.
    func liveSessionCount() async throws -> Int {
        let rows = try await app.database.client.query(
            "SELECT count(*)::int8 FROM sessions WHERE tenant_id = \(tenant.id) AND revoked_at IS NULL AND expires_at > now()")
        var count = 0
        for try await value in rows.decode(Int.self) { count = value }
        return count
    }

    struct SignInFailed: Error, CustomStringConvertible {
        let status: Int
        let body: String
        var description: String { "sign-in failed \(status): \(body)" }
    }
}

extension Dictionary where Key == String, Value == Any {
    subscript(path path: String) -> Any? {
        var current: Any? = self
        for part in path.split(separator: ".") { current = (current as? [String: Any])?[String(part)] }
        return current
    }
}

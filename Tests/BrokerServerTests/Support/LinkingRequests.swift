import BrokerCore
import BrokerServer
import Foundation
import HTTPTypes
import HummingbirdTesting
import MockIdP
import NIOCore
import PostgresNIO
import Storage
import Testing
import TestSupport
@testable import BrokerApplication
@testable import BrokerServer

/// The linking tests' requests (`IdentityLinkingTests` and the suites that link or sign in
/// through it): tenant acme with Apple added, sign-ins of each provider, link and unlink.
enum LinkingRequests {
    typealias S = ProviderTestSetup

    static let accountToken = HTTPField.Name("X-Account-Token")!

    /// Tenant `acme` of ``ProviderTestSetup`` with Apple added (group com.acme.app, no nonce required).
    static func run(_ test: @Sendable @escaping (S) async throws -> Void) async throws {
        try await S.run { setup in
            let apple = AppleAdmin(database: setup.app.database, actor: "test")
            _ = try await apple.setTeam(
                tenant: "acme", teamID: "TEAM000001", keyID: "KEY0000001", p8PEM: S.p8PEM, secrets: setup.app.secrets)
            _ = try await apple.addGroup(tenant: "acme", primaryAppID: "com.acme.app", nonceRequired: false)
            try await test(setup)
        }
    }

    /// A signed-in account: its id, access token and refresh token.
    struct SignedIn {
        let accountID: String
        let accessToken: String
        let refreshToken: String
        let body: [String: Any]
    }

    static func appleToken(_ setup: S, subject: String, email: String? = "person@example.com", isPrivateEmail: Bool = false) throws
        -> String
    {
        try setup.mocks.apple.mint(
            setup.mocks.apple.claims(subject: subject, audience: "com.acme.app", email: email, isPrivateEmail: isPrivateEmail))
    }

    static func signIn(_ setup: S, _ provider: String, _ body: [String: Any], tenant: String = "acme") async throws -> SignedIn {
        let response = try await setup.post("/v1/sign-in/\(provider)", json: body, tenant: tenant)
        #expect(response.status == .ok, "\(String(buffer: response.body))")
        let json = try response.json()
        return SignedIn(
            accountID: try #require(json[path: "account.id"] as? String),
            accessToken: try #require(json[path: "session.access_token"] as? String),
            refreshToken: try #require(json[path: "session.refresh_token"] as? String), body: json)
    }

    static func signInWithApple(_ setup: S, subject: String, email: String? = "person@example.com") async throws -> SignedIn {
        try await signIn(
            setup, "apple", ["client_id": "com.acme.app", "identity_token": try appleToken(setup, subject: subject, email: email)])
    }

    static func link(_ setup: S, account: String, token: String?, _ body: [String: Any], tenant: String = "acme") async throws
        -> TestResponse
    {
        var headers: HTTPFields = [.authorization: "Bearer \(setup.keys[tenant] ?? "")", .contentType: "application/json"]
        if let token { headers[accountToken] = token }
        return try await setup.client.execute(
            uri: "/v1/accounts/\(account)/identities", method: .post, headers: headers,
            body: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body)))
    }

    static func unlink(_ setup: S, account: String, identity: String, token: String?) async throws -> TestResponse {
        var headers: HTTPFields = [.authorization: "Bearer \(setup.keys["acme"] ?? "")"]
        if let token { headers[accountToken] = token }
        return try await setup.client.execute(uri: "/v1/accounts/\(account)/identities/\(identity)", method: .delete, headers: headers)
    }

    static func google(_ setup: S, subject: String, email: String? = "person@gmail.com", verified: Bool = true) throws -> [String: Any] {
        [
            "provider": "google",
            "id_token": try setup.google.mint(
                setup.google.claims(subject: subject, audience: S.webClient, email: email, emailVerified: verified, name: "Grace Hopper")),
        ]
    }

    static func facebook(_ setup: S, user: String, email: String = "ada@example.com") -> [String: Any] {
        [
            "provider": "facebook",
            "access_token": setup.facebook.issueAccessToken(appID: S.appID, userID: user, name: "Ada Lovelace", email: email),
        ]
    }

    static func identities(_ setup: S, of account: String) async throws -> [[String: Any]] {
        let response = try await setup.client.execute(
            uri: "/v1/accounts/\(account)", method: .get, headers: [.authorization: "Bearer \(setup.keys["acme"] ?? "")"])
        return try response.json()["identities"] as? [[String: Any]] ?? []
    }

    static func auditActions(_ setup: S) async throws -> [String] {
        try await setup.app.database.auditLog.entries(tenantID: setup.tenant.id).map(\.action)
    }

    static func holders(_ setup: S, subject: String) async throws -> [String] {
        let rows = try await setup.app.database.client.query(
            "SELECT account_id FROM identities WHERE tenant_id = \(setup.tenant.id) AND provider = 'google' AND subject = \(subject)")
        var found: [String] = []
        for try await id in rows.decode(UUID.self) { found.append(id.lowercasedString) }
        return found
    }
}

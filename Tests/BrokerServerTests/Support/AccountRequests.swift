import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Storage
import Testing
@testable import BrokerApplication
@testable import BrokerServer

/// Account requests of the account status tests and the suites that refresh, introspect or read
/// an account through them: disable and enable, refresh, introspection, the account's status.
enum AccountRequests {
    typealias S = ProviderTestSetup

    typealias L = LinkingRequests

    static func change(_ setup: S, _ account: String, _ action: String, key: String? = nil) async throws -> TestResponse {
        // A bare POST, as `curl -X POST` sends it: no body, no Content-Type.
        try await setup.client.execute(
            uri: "/v1/accounts/\(account)/\(action)", method: .post, headers: bearer(key ?? setup.keys["acme"] ?? ""))
    }

    static func introspect(_ setup: S, _ token: String) async throws -> Bool? {
        let response = try await setup.post("/v1/sessions/introspect", json: ["token": token])
        #expect(response.status == .ok)
        return try response.json()["active"] as? Bool
    }

    static func refresh(_ setup: S, _ token: String) async throws -> TestResponse {
        try await setup.post("/v1/sessions/refresh", json: ["refresh_token": token])
    }

    static func accountAudit(_ setup: S) async throws -> [AuditLogRepository.Entry] {
        try await setup.app.database.auditLog.entries(tenantID: setup.tenant.id).filter { $0.action.hasPrefix("account.") }
    }

    static func status(_ setup: S, _ account: String) async throws -> String? {
        let response = try await setup.client.execute(
            uri: "/v1/accounts/\(account)", method: .get, headers: bearer(setup.keys["acme"] ?? ""))
        return try response.json()[path: "account.status"] as? String
    }
}

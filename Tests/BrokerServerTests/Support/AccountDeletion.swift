import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import MockIdP
import PostgresNIO
import Providers
import Storage
import Testing

/// What the account deletion tests share with the suites that delete or sign in with a code:
/// `DELETE /v1/accounts/{id}`, an Apple sign-in whose refresh token is kept, the revocation rows.
enum AccountDeletion {
    static func delete(_ setup: AppleTestSetup, _ accountID: String, key: String? = nil) async throws -> TestResponse {
        try await setup.client.execute(
            uri: "/v1/accounts/\(accountID)", method: .delete, headers: [.authorization: "Bearer \(key ?? setup.apiKey)"])
    }

    /// Signs `subject` in through com.acme.app with an authorization code: Apple's refresh token
    /// is kept. Returns the account id, the broker's refresh token and Apple's refresh token.
    static func signInWithCode(_ setup: AppleTestSetup, subject: String) async throws -> (account: String, refresh: String, apple: String) {
        let before = Set(setup.apple.issuedRefreshTokens(clientID: "com.acme.app"))
        let code = setup.apple.issueCode(clientID: "com.acme.app", subject: subject)
        let body = try await setup.signIn([
            "client_id": "com.acme.app", "identity_token": try setup.token(subject: subject), "authorization_code": code,
        ])
        let issued = Set(setup.apple.issuedRefreshTokens(clientID: "com.acme.app")).subtracting(before)
        return (
            try #require(body[path: "account.id"] as? String), try #require(body[path: "session.refresh_token"] as? String),
            try #require(issued.first)
        )
    }

    static func scalar<T: PostgresDecodable & Sendable>(_ setup: AppleTestSetup, _ query: PostgresQuery, as: T.Type) async throws -> T? {
        let rows = try await setup.app.database.client.query(query)
        var value: T?
        for try await row in rows.decode(T.self) { value = row }
        return value
    }
}

import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import MockIdP
import NIOCore
import PostgresNIO
import Storage
import Testing

/// Apple server-to-server notifications as the tests send them, and the account they change
/// (the notification tests and the Apple web sign-in tests).
enum AppleNotifications {
    static let primaryAppID = "com.acme.app"

    static func post(_ setup: AppleTestSetup, _ body: Data, contentType: String = "application/json") async throws -> TestResponse {
        try await setup.client.execute(
            uri: "/apple/notifications", method: .post, headers: [.contentType: contentType], body: ByteBuffer(bytes: body))
    }

    static func notify(
        _ setup: AppleTestSetup, _ type: String, subject: String, audience: String = primaryAppID, jti: String? = nil,
        forgery: TokenForgery = .valid
    ) async throws -> TestResponse {
        try await post(
            setup, try setup.apple.notificationBody(audience: audience, type: type, subject: subject, jti: jti, forgery: forgery))
    }

    static func account(_ setup: AppleTestSetup, _ id: String) async throws -> [String: Any] {
        try await setup.client.execute(uri: "/v1/accounts/\(id)", method: .get, headers: bearer(setup.apiKey)).json()
    }

    static func count(_ setup: AppleTestSetup, _ sql: String) async throws -> Int {
        let rows = try await setup.app.database.client.query(PostgresQuery(unsafeSQL: sql))
        var count = 0
        for try await value in rows.decode(Int.self) { count = value }
        return count
    }

    /// The events after the sign-ins' `account.created`.
    static func events(_ setup: AppleTestSetup) async throws -> [String] {
        let rows = try await setup.app.database.client.query(
            "SELECT event_type FROM events_outbox WHERE event_type <> 'account.created' ORDER BY id")
        var types: [String] = []
        for try await type in rows.decode(String.self) { types.append(type) }
        return types
    }

    /// Posts `type` for `subject` with the `events` member's `event_time` replaced by `time`
    /// (any JSON number text) and the given `jti`.
    static func notify(_ setup: AppleTestSetup, _ type: String, subject: String, eventTimeText time: String, jti: String) async throws
        -> TestResponse
    {
        var claims = try setup.apple.notificationClaims(audience: primaryAppID, type: type, subject: subject, jti: jti)
        var email = ""
        if type.hasPrefix("email-") { email = #","email":"x@privaterelay.appleid.com","is_private_email":"true""# }
        claims["events"] = .string(#"{"type":"\#(type)","sub":"\#(subject)","event_time":\#(time)\#(email)}"#)
        return try await post(setup, try JSONSerialization.data(withJSONObject: ["payload": try setup.apple.mint(claims)]))
    }
}

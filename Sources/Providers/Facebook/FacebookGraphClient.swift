import AsyncHTTPClient
import BrokerCore
import Crypto
import Foundation
import NIOCore
import NIOHTTP1

/// The two Graph API calls of classic Facebook Login: `debug_token` (with the app access token)
/// and `/me` (with the user's token and `appsecret_proof`). Every call is bounded by the
/// provider timeout; AsyncHTTPClient keeps connections to Graph alive and reuses them.
public struct FacebookGraphClient: Sendable {
    /// What `debug_token` says of a user access token.
    public struct TokenInfo: Sendable, Equatable {
        public var isValid: Bool
        public var appID: String?
        public var userID: String?
        /// 0: the token does not expire.
        public var expiresAt: Int?
    }

    /// The person `/me` describes.
    public struct Person: Sendable, Equatable {
        public var id: String
        public var name: String?
        public var email: String?
    }

    let baseURL: String
    let httpClient: HTTPClient
    let timeout: TimeAmount

    public init(baseURL: String, httpClient: HTTPClient = .providers, timeoutSeconds: Int = 10) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.httpClient = httpClient
        self.timeout = .seconds(Int64(timeoutSeconds))
    }

    /// `GET /debug_token?input_token=…&access_token=<app id>|<app secret>`.
    public func debugToken(_ token: String, appID: String, appSecret: String) async throws(ProviderFailure) -> TokenInfo {
        let object = try await get("debug_token", query: [("input_token", token), ("access_token", "\(appID)|\(appSecret)")])
        guard let data = object["data"]?.object else { throw .unreadableAnswer(.facebook, .graph) }
        return TokenInfo(
            isValid: data["is_valid"] == .bool(true), appID: Self.identifier(data["app_id"]), userID: Self.identifier(data["user_id"]),
            expiresAt: data["expires_at"]?.number.map { Int($0) })
    }

    /// `GET /me?fields=id,name,email&access_token=…&appsecret_proof=…`.
    public func me(_ token: String, appSecret: String) async throws(ProviderFailure) -> Person {
        let object = try await get(
            "me", query: [("fields", "id,name,email"), ("access_token", token), ("appsecret_proof", Self.proof(token, appSecret: appSecret))])
        guard let id = Self.identifier(object["id"]) else { throw .unreadableAnswer(.facebook, .graph) }
        return Person(id: id, name: object["name"]?.string, email: object["email"]?.string)
    }

    /// `appsecret_proof`: the lowercase hex HMAC-SHA256 of the user token keyed by the app secret.
    public static func proof(_ token: String, appSecret: String) -> String {
        Hex.encode(HMAC<SHA256>.authenticationCode(for: Data(token.utf8), using: SymmetricKey(data: Data(appSecret.utf8))))
    }

    /// A 5xx, a reset connection or no answer in time is Facebook being down; any other error
    /// answer is Facebook refusing the token.
    private func get(_ path: String, query: [(String, String)]) async throws(ProviderFailure) -> [String: JSONValue] {
        let request = HTTPClientRequest(url: "\(baseURL)/\(path)?\(FormEncoding.encode(query))")
        let status: UInt
        let body: ByteBuffer
        do {
            let response = try await httpClient.execute(request, deadline: .now() + timeout)
            status = response.status.code
            body = try await response.body.collect(upTo: 1 << 20)
        } catch {
            throw .unavailable(.facebook, .graph)
        }
        guard status < 500 else { throw .unavailable(.facebook, .graph) }
        guard let object = (try? JSONValue.parse(body.readableBytesView))?.object else { throw .unreadableAnswer(.facebook, .graph) }
        guard status == 200 else {
            let message = object["error"]?.object?["message"]?.string ?? "HTTP \(status)"
            throw .rejected(.init("invalid_token", "Facebook refused the request: \(message.prefix(200))"))
        }
        return object
    }

    /// Graph sends ids as strings; a number is read as its digits.
    static func identifier(_ value: JSONValue?) -> String? {
        if let text = value?.string, !text.isEmpty { return text }
        if let number = value?.number, number >= 0, number == number.rounded() { return String(Int64(number)) }
        return nil
    }

}

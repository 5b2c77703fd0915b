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
    let timeout: Duration

    /// `timeoutSeconds` (`BROKER_PROVIDER_TIMEOUT`) bounds each call as a whole: connecting,
    /// the head and the whole body.
    public init(baseURL: String, httpClient: HTTPClient = .providers, timeoutSeconds: Int = 10) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.httpClient = httpClient
        self.timeout = .seconds(min(max(timeoutSeconds, 1), 3_600))
    }

    /// `GET /debug_token?input_token=…&access_token=<app id>|<app secret>`. Every member is read
    /// with its type and range checked: an answer that does not fit (an `expires_at` of 1e300, a
    /// `user_id` of -1, a string where a boolean belongs) is Facebook misbehaving.
    public func debugToken(_ token: String, appID: String, appSecret: String) async throws(ProviderFailure) -> TokenInfo {
        let object = try await get("debug_token", query: [("input_token", token), ("access_token", "\(appID)|\(appSecret)")])
        guard let data = object["data"]?.object, case .bool(let isValid)? = data["is_valid"] else { throw Self.unreadable }
        return TokenInfo(
            isValid: isValid, appID: try Self.optionalIdentifier(data["app_id"]),
            userID: try Self.optionalIdentifier(data["user_id"]),
            expiresAt: try Self.optional(data["expires_at"]) { $0.integer(in: Self.timestamps) })
    }

    /// `GET /me?fields=id,name,email&access_token=…&appsecret_proof=…`.
    public func me(_ token: String, appSecret: String) async throws(ProviderFailure) -> Person {
        let object = try await get(
            "me",
            query: [("fields", "id,name,email"), ("access_token", token), ("appsecret_proof", Self.proof(token, appSecret: appSecret))])
        guard let id = Self.identifier(object["id"]) else { throw Self.unreadable }
        return Person(
            id: id, name: try Self.optional(object["name"]) { $0.string(maxBytes: Self.maxNameBytes) },
            email: try Self.optional(object["email"]) { $0.string(maxBytes: Self.maxEmailBytes) })
    }

    /// `appsecret_proof`: the lowercase hex HMAC-SHA256 of the user token keyed by the app secret.
    public static func proof(_ token: String, appSecret: String) -> String {
        Hex.encode(HMAC<SHA256>.authenticationCode(for: Data(token.utf8), using: SymmetricKey(data: Data(appSecret.utf8))))
    }

    /// Unix times Graph may send: 0 (never expires) up to the end of the year 9999.
    static let timestamps = 0...253_402_300_799
    /// Longest id, name and email taken from Graph (an id is a key of the identities table).
    static let maxIdentifierBytes = 255
    static let maxNameBytes = 4_096
    static let maxEmailBytes = 320

    /// A 5xx, a reset connection or no whole answer in time is Facebook being down; any other
    /// error answer is Facebook refusing the token.
    private func get(_ path: String, query: [(String, String)]) async throws(ProviderFailure) -> [String: JSONValue] {
        let request = HTTPClientRequest(url: "\(baseURL)/\(path)?\(FormEncoding.encode(query))")
        let answer: ProviderAnswer
        do {
            answer = try await ProviderAnswer.fetch(request, with: httpClient, timeout: timeout)
        } catch {
            throw .unavailable(.facebook, .graph)
        }
        guard answer.status < 500 else { throw .unavailable(.facebook, .graph) }
        guard let object = (try? JSONValue.parse(answer.body.readableBytesView))?.object else { throw Self.unreadable }
        guard answer.status == 200 else {
            let message = object["error"]?.object?["message"]?.string.map { ProviderAnswer.shown($0, 200) } ?? "HTTP \(answer.status)"
            throw .rejected(.init("invalid_token", "Facebook refused the request: \(message)"))
        }
        return object
    }

    /// Graph sends ids as strings; a number is read as its digits when it is a whole number that
    /// a Double holds exactly (at most 2^53).
    static func identifier(_ value: JSONValue?) -> String? {
        if let text = value?.string(maxBytes: maxIdentifierBytes), !text.isEmpty { return text }
        if let number = value?.integer(in: 0...(1 << 53)) { return String(number) }
        return nil
    }

    /// An id member that may be absent, but when present must be an id.
    private static func optionalIdentifier(_ value: JSONValue?) throws(ProviderFailure) -> String? {
        try optional(value) { identifier($0) }
    }

    /// A member that may be absent; when present, `read` must accept it (Graph leaves out what
    /// it does not have: a null is as odd as a wrong type).
    private static func optional<T>(_ value: JSONValue?, _ read: (JSONValue) -> T?) throws(ProviderFailure) -> T? {
        guard let value else { return nil }
        guard let read = read(value) else { throw unreadable }
        return read
    }

    /// Logged where the failure becomes a problem (SignInProblems), with the request's id.
    private static let unreadable = ProviderFailure.unreadableAnswer(.facebook, .graph)
}

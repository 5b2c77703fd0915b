import AsyncHTTPClient
import BrokerCore
import Foundation
import NIOCore
import NIOHTTP1

/// Apple's token endpoint: exchanges authorization codes and revokes refresh tokens. Apple's
/// errors become ``ProviderFailure``s (the problem mapping tells the operator what to fix).
public struct AppleTokenClient: Sendable {
    /// Apple's answer to a code exchange, every member read with its type and range checked.
    public struct TokenResponse: Sendable, Equatable {
        public let accessToken: String?
        public let idToken: String?
        public let refreshToken: String?
        public let expiresIn: Int?

        /// The longest token taken from Apple, and the longest lifetime (ten years).
        static let maxTokenBytes = 16_384
        static let lifetimes = 0...315_360_000

        /// Reads Apple's JSON answer; nil when it is not a JSON object whose members have their
        /// types (a string token, a whole `expires_in` within ten years) or are absent (Apple
        /// leaves out what it does not send: a null is as odd as a wrong type).
        init?(json bytes: some Collection<UInt8>) {
            guard let object = (try? JSONValue.parse(bytes))?.object else { return nil }
            func member<T>(_ name: String, _ read: (JSONValue) -> T?) -> T?? {
                guard let value = object[name] else { return .some(nil) }
                return read(value).map { .some($0) }
            }
            guard let accessToken = member("access_token", { $0.string(maxBytes: Self.maxTokenBytes) }),
                let idToken = member("id_token", { $0.string(maxBytes: Self.maxTokenBytes) }),
                let refreshToken = member("refresh_token", { $0.string(maxBytes: Self.maxTokenBytes) }),
                let expiresIn = member("expires_in", { $0.integer(in: Self.lifetimes) })
            else { return nil }
            self.accessToken = accessToken
            self.idToken = idToken
            self.refreshToken = refreshToken
            self.expiresIn = expiresIn
        }
    }

    let baseURL: String
    let httpClient: HTTPClient
    let timeout: Duration

    /// `timeout` bounds each call as a whole: connecting, the head and the whole body.
    public init(baseURL: String, httpClient: HTTPClient = .providers, timeout: Duration = .seconds(10)) {
        self.baseURL = baseURL
        self.httpClient = httpClient
        self.timeout = timeout
    }

    public func exchange(code: String, clientID: String, clientSecret: String, redirectURI: String? = nil)
        async throws(ProviderFailure) -> TokenResponse
    {
        var form = [
            ("client_id", clientID), ("client_secret", clientSecret), ("code", code), ("grant_type", "authorization_code"),
        ]
        if let redirectURI { form.append(("redirect_uri", redirectURI)) }
        // A sign-in waits on the exchange: behind the endpoint's circuit (decision 0049).
        let answer = try await post(Apple.tokenURL(base: baseURL), form: form, circuits: .shared)
        guard answer.status == 200 else { throw Self.translate(Self.error(of: answer), clientID: clientID) }
        guard let tokens = TokenResponse(json: answer.body.readableBytesView) else { throw .unreadableAnswer(.apple, .tokenEndpoint) }
        return tokens
    }

    /// Whether Apple still honours a refresh token (the refresh grant at `/auth/token`): true
    /// when Apple answers 200, false on `invalid_grant` (the person stopped using Sign in with
    /// Apple with the app, or the token was revoked). Anything else throws: Apple unreachable,
    /// failing or slow (``ProviderFailure/unavailable(_:_:)``), or refusing the client
    /// (`invalid_client`) — never read as a revocation.
    public func isValid(refreshToken: String, clientID: String, clientSecret: String) async throws(ProviderFailure) -> Bool {
        let answer = try await post(
            Apple.tokenURL(base: baseURL),
            form: [
                ("client_id", clientID), ("client_secret", clientSecret), ("grant_type", "refresh_token"), ("refresh_token", refreshToken),
            ])
        if answer.status == 200 { return true }
        let error = Self.error(of: answer)
        if answer.status == 400, error == "invalid_grant" { return false }
        throw Self.translate(error, clientID: clientID)
    }

    /// Revokes a refresh token at Apple (`/auth/revoke`). Apple answers 200 with an empty
    /// body, also for a token it no longer knows.
    public func revoke(refreshToken: String, clientID: String, clientSecret: String) async throws(ProviderFailure) {
        let answer = try await post(
            Apple.revokeURL(base: baseURL),
            form: [
                ("client_id", clientID), ("client_secret", clientSecret), ("token", refreshToken), ("token_type_hint", "refresh_token"),
            ],
            maxBytes: 65_536)
        guard answer.status == 200 else { throw Self.translate(Self.error(of: answer), clientID: clientID) }
    }

    /// Posts `form` to one of Apple's endpoints. Apple unreachable, slower than the timeout or
    /// answering 5xx (Apple being down, not refusing) is ``ProviderFailure/unavailable(_:_:)``.
    /// `circuits`: only calls a sign-in waits on; the lifecycle workers (revocations, credential
    /// checks, transfers) pace their own retries and neither consult nor feed a circuit.
    func post(
        _ url: String, form: [(String, String)], bearer: String? = nil, maxBytes: Int = 1 << 20, circuits: ProviderCircuits? = nil
    ) async throws(ProviderFailure) -> ProviderAnswer {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        if let bearer { request.headers.add(name: "Authorization", value: "Bearer \(bearer)") }
        request.headers.add(name: "Accept", value: "application/json")
        request.body = .bytes(ByteBuffer(string: FormEncoding.encode(form)))
        let answer: ProviderAnswer
        do {
            answer = try await ProviderAnswer.fetch(request, with: httpClient, timeout: timeout, maxBytes: maxBytes, circuits: circuits)
        } catch {
            throw .unavailable(.apple, .tokenEndpoint)
        }
        guard answer.status < 500 else { throw .unavailable(.apple, .tokenEndpoint) }
        return answer
    }

    /// Apple's `error` member, or `http_<status>` when the answer has none.
    static func error(of answer: ProviderAnswer) -> String {
        (try? JSONValue.parse(answer.body.readableBytesView))?["error"]?.string ?? "http_\(answer.status)"
    }

    /// `invalid_client`: the client secret is wrong; `invalid_grant`: the code is.
    static func translate(_ error: String, clientID: String) -> ProviderFailure {
        .codeExchangeRefused(reason: ProviderAnswer.shown(error, 60), clientID: clientID)
    }
}

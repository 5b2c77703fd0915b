import AsyncHTTPClient
import BrokerCore
import Foundation
import NIOCore
import NIOHTTP1

/// Apple's token endpoint: exchanges authorization codes and revokes refresh tokens. Apple's
/// errors become ``ProviderFailure``s (the problem mapping tells the operator what to fix).
public struct AppleTokenClient: Sendable {
    public struct TokenResponse: Decodable, Sendable {
        public let accessToken: String?
        public let idToken: String?
        public let refreshToken: String?
        public let expiresIn: Int?
        enum CodingKeys: String, CodingKey {
            case accessToken = "access_token"
            case idToken = "id_token"
            case refreshToken = "refresh_token"
            case expiresIn = "expires_in"
        }
    }

    let baseURL: String
    let httpClient: HTTPClient

    public init(baseURL: String, httpClient: HTTPClient = .providers) {
        self.baseURL = baseURL
        self.httpClient = httpClient
    }

    public func exchange(code: String, clientID: String, clientSecret: String, redirectURI: String? = nil)
        async throws(ProviderFailure) -> TokenResponse
    {
        var form = [
            ("client_id", clientID), ("client_secret", clientSecret), ("code", code), ("grant_type", "authorization_code"),
        ]
        if let redirectURI { form.append(("redirect_uri", redirectURI)) }
        var request = HTTPClientRequest(url: Apple.tokenURL(base: baseURL))
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "Accept", value: "application/json")
        request.body = .bytes(ByteBuffer(string: FormEncoding.encode(form)))
        let response: HTTPClientResponse
        let body: ByteBuffer
        do {
            response = try await httpClient.execute(request, timeout: .seconds(10))
            body = try await response.body.collect(upTo: 1 << 20)
        } catch {
            throw .unavailable(.apple, .tokenEndpoint)
        }
        let data = Data(body.readableBytesView)
        guard response.status == .ok else {
            let error = (try? JSONDecoder().decode([String: String].self, from: data))?["error"] ?? "http_\(response.status.code)"
            throw Self.translate(error, clientID: clientID)
        }
        do {
            return try JSONDecoder().decode(TokenResponse.self, from: data)
        } catch {
            throw .unreadableAnswer(.apple, .tokenEndpoint)
        }
    }

    /// Revokes a refresh token at Apple (`/auth/revoke`). Apple answers 200 with an empty
    /// body, also for a token it no longer knows.
    public func revoke(refreshToken: String, clientID: String, clientSecret: String) async throws(ProviderFailure) {
        var request = HTTPClientRequest(url: Apple.revokeURL(base: baseURL))
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.body = .bytes(
            ByteBuffer(
                string: FormEncoding.encode([
                    ("client_id", clientID), ("client_secret", clientSecret), ("token", refreshToken),
                    ("token_type_hint", "refresh_token"),
                ])))
        let response: HTTPClientResponse
        do {
            response = try await httpClient.execute(request, timeout: .seconds(10))
            _ = try await response.body.collect(upTo: 65_536)
        } catch {
            throw .unavailable(.apple, .tokenEndpoint)
        }
        guard response.status == .ok else { throw Self.translate("http_\(response.status.code)", clientID: clientID) }
    }

    /// `invalid_client`: the client secret is wrong; `invalid_grant`: the code is.
    static func translate(_ error: String, clientID: String) -> ProviderFailure {
        .codeExchangeRefused(reason: String(error.prefix(60)), clientID: clientID)
    }
}

import AsyncHTTPClient
import BrokerCore
import Crypto
import Foundation
import NIOCore
import NIOHTTP1

/// The OpenID Connect authorization code flow with PKCE (S256), `state` and `nonce` (RFC 9700),
/// shared by the `oidc` and `google` types: the authorize URL, the code redeemed at the token
/// endpoint with the client's secret (`client_secret_basic` or `client_secret_post`, as
/// discovery said), and the id token of that answer handed to the type's own verification.
struct OIDCCodeFlow: Sendable {
    let httpClient: HTTPClient
    let timeout: Duration
    let secrets: SecretBox
    /// `{BROKER_PUBLIC_URL}/oidc/callback`.
    let defaultRedirectURI: String

    /// Verifies the token endpoint's id token against the request's nonce (`sharedSecret`: the
    /// client secret, for an HS256 token when discovery lists HS256).
    typealias Verify =
        @Sendable (_ idToken: String, _ nonce: String, _ sharedSecret: SymmetricKey?, _ tenantID: UUID, _ now: Date)
        async throws(ProviderFailure) -> VerifiedProof

    /// The web client of a configuration whose web flow is on.
    func webClient(
        provider: ProviderID, configuration: ProviderConfiguration, web: OIDCWebSettings, verify: @escaping Verify
    ) throws -> WebClient {
        guard let sealed = configuration.sealedSecret else { throw WebClientFailure.notSupported(provider) }
        let redirectURI = web.redirectURI ?? defaultRedirectURI
        let flow = self
        let tenantID = configuration.tenantID
        return WebClient(
            provider: provider, clientID: web.clientID, redirectURI: redirectURI, returnURLs: web.returnURLs,
            authorizationURL: { request in
                AppleProvider.url(
                    web.authorizationEndpoint,
                    [
                        ("response_type", "code"), ("client_id", web.clientID), ("redirect_uri", redirectURI), ("scope", web.scopes),
                        ("state", request.state), ("nonce", request.nonce), ("code_challenge", request.codeChallenge),
                        ("code_challenge_method", "S256"),
                    ])
            },
            complete: { response, request, _, checkIdentity, now in
                guard let code = response.code, !code.isEmpty, code.utf8.count <= 4_096 else {
                    throw ProviderFailure.malformedProof("the callback carries no code")
                }
                let secret = try flow.secrets.open(
                    sealed, context: ProviderConfiguration.secretContext(tenantID: tenantID, provider: provider, clientID: web.clientID),
                    what: "\(provider.rawValue) client secret")
                let idToken = try await flow.redeem(
                    code: code, provider: provider, web: web, redirectURI: redirectURI, secret: String(decoding: secret, as: UTF8.self),
                    verifier: request.codeVerifier)
                let verified = try await verify(idToken, request.nonce, web.acceptsHS256 ? SymmetricKey(data: secret) : nil, tenantID, now)
                // The identity is known only from the token endpoint's answer: the intent and the
                // account's status are checked then, before the callback hands out a code (issue
                // 39 F15: account_not_found and account_disabled surfaced only at the exchange).
                try await checkIdentity(verified.identity)
                return WebVerification(verified: verified, kept: nil)
            }, identityFollowsRedemption: true)
    }

    /// Redeems `code` at the token endpoint and returns the answer's id token.
    func redeem(code: String, provider: ProviderID, web: OIDCWebSettings, redirectURI: String, secret: String, verifier: String)
        async throws(ProviderFailure) -> String
    {
        var form = [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI), ("code_verifier", verifier)]
        var request = HTTPClientRequest(url: web.tokenEndpoint)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "Accept", value: "application/json")
        if web.tokenAuthMethod == "client_secret_post" {
            form += [("client_id", web.clientID), ("client_secret", secret)]
        } else {
            let credentials = "\(FormEncoding.escape(web.clientID)):\(FormEncoding.escape(secret))"
            request.headers.add(name: "Authorization", value: "Basic " + Data(credentials.utf8).base64EncodedString())
        }
        request.body = .bytes(ByteBuffer(string: FormEncoding.encode(form)))
        let answer: ProviderAnswer
        do {
            answer = try await ProviderAnswer.fetch(request, with: httpClient, timeout: timeout, maxBytes: 262_144)
        } catch {
            throw .unavailable(provider, .tokenEndpoint)
        }
        guard answer.status < 500 else { throw .unavailable(provider, .tokenEndpoint) }
        let document = (try? JSONValue.parse(answer.body.readableBytesView, maxDepth: 8))?.object
        guard answer.status == 200 else {
            let error = document?["error"]?.string(maxBytes: 200) ?? "http_\(answer.status)"
            throw .tokenRequestRefused(provider, reason: ProviderAnswer.shown(error, 60))
        }
        guard let idToken = document?["id_token"]?.string(maxBytes: 16_384), !idToken.isEmpty else {
            throw .unreadableAnswer(provider, .tokenEndpoint)
        }
        return idToken
    }
}

import Crypto
import Foundation
import JWTKit
import Synchronization

/// The OpenID Connect authorization code flow of a single-tenant ``MockOIDCIssuer``: an authorize
/// endpoint (`<issuer>/authorize`) that consents at once for ``webUser`` and redirects to the
/// redirect URI with a code (or `error=access_denied`), and a token endpoint (`<issuer>/token`)
/// that checks the client's secret (HTTP Basic or in the form), the code, the redirect URI and
/// the PKCE verifier (S256) before answering an id token with the request's nonce. Faults:
/// ``WebAuthorizeFault`` and ``WebTokenFault``.
extension MockOIDCIssuer {
    /// Who consents on the authorize endpoint.
    public struct WebUser: Sendable, Equatable {
        public var subject: String
        public var email: String?
        public var name: String?

        public init(subject: String, email: String?, name: String?) {
            self.subject = subject
            self.email = email
            self.name = name
        }
    }

    public enum WebAuthorizeFault: Sendable, Equatable {
        case none
        /// The person refuses: `error=access_denied`.
        case deny
    }

    public enum WebTokenFault: Sendable, Equatable {
        case none
        /// This status with an `{"error": "server_error"}` body.
        case status(Int)
        /// No answer (as ``MockOIDCIssuer/KeysFault/hang``).
        case hang
        /// The id token carries another nonce than the authorize request's.
        case wrongNonce
    }

    /// Registers a client of the web flow with its secret.
    public func registerWebClient(_ clientID: String, secret: String) {
        web.state.withLock { $0.clients[clientID] = secret }
    }

    public var webUser: WebUser {
        get { web.state.withLock { $0.user } }
        set { web.state.withLock { $0.user = newValue } }
    }

    public var webAuthorizeFault: WebAuthorizeFault {
        get { web.state.withLock { $0.authorizeFault } }
        set { web.state.withLock { $0.authorizeFault = newValue } }
    }

    public var webTokenFault: WebTokenFault {
        get { web.state.withLock { $0.tokenFault } }
        set {
            web.state.withLock { $0.tokenFault = newValue }
            changeFaults { _ in }
        }
    }

    /// HS256 id tokens from the token endpoint (and HS256 in discovery).
    public var webHS256: Bool {
        get { web.state.withLock { $0.hs256 } }
        set { web.state.withLock { $0.hs256 = newValue } }
    }

    /// `token_endpoint_auth_methods_supported`.
    public var webAuthMethods: [String] {
        get { web.state.withLock { $0.authMethods } }
        set { web.state.withLock { $0.authMethods = newValue } }
    }

    /// Requests received at the token endpoint.
    public var webTokenRequests: Int { web.state.withLock { $0.tokenRequests } }

    /// The authorize endpoint's redirect; the id token of the code is minted now, for a mock
    /// served at `base` (not for HS256 tokens, which the token endpoint signs with the secret).
    func authorizeRedirect(_ query: [String: String], base: String, now: Date = Date()) -> String? {
        web.authorizeRedirect(query, now: now) { clientID, nonce, user in
            guard !self.webHS256 else { return nil }
            let claims = self.claims(
                base: base, subject: user.subject, audience: clientID, nonce: nonce, email: user.email, name: user.name, now: now)
            return try? self.mint(claims, algorithm: self.algorithms.contains(.es256) ? .es256 : nil)
        }
    }

    /// The token endpoint's answer to a form (and its `Authorization` header), for a mock served
    /// at `base`. `count`: count the request.
    func tokenAnswer(form: [String: String], authorization: String?, base: String, count: Bool, now: Date = Date()) throws -> Answer {
        let (fault, hs256) = web.state.withLock { web in
            if count { web.tokenRequests += 1 }
            return (web.tokenFault, web.hs256)
        }
        switch fault {
        case .status(let status): return .response(status: status, body: Data(#"{"error":"server_error"}"#.utf8))
        case .hang: return .hang(generation: state.withLock { $0.faultGeneration })
        case .none, .wrongNonce: break
        }
        switch web.redeem(form: form, authorization: authorization, now: now) {
        case .failure(let error): return .response(status: error.status, body: error.body)
        case .success(let redeemed):
            let idToken: String
            if !hs256, let minted = redeemed.idToken {
                idToken = minted
            } else {
                let claims = self.claims(
                    base: base, subject: redeemed.user.subject, audience: redeemed.clientID, nonce: redeemed.nonce,
                    email: redeemed.user.email,
                    name: redeemed.user.name, now: now)
                // ES256 when the issuer has such a key: a P-256 signature costs the mock a fraction of
                // an RSA one (the broker accepts what discovery lists).
                idToken =
                    hs256
                    ? try Self.hs256(claims, secret: redeemed.secret)
                    : try mint(claims, algorithm: algorithms.contains(.es256) ? .es256 : nil)
            }
            return .response(status: 200, body: MockCodeFlow.tokenBody(idToken: idToken))
        }
    }

    /// An HS256 JWT signed with the client secret (LINE's web login tokens).
    public static func hs256(_ claims: [String: JWTHeaderField], secret: String) throws -> String {
        let header = try MockKeyRing.json(["alg": .string("HS256"), "typ": .string("JWT")])
        let input = "\(base64URL(header)).\(base64URL(try MockKeyRing.json(claims)))"
        let mac = HMAC<SHA256>.authenticationCode(for: Data(input.utf8), using: SymmetricKey(data: Data(secret.utf8)))
        return "\(input).\(base64URL(Data(mac)))"
    }
}

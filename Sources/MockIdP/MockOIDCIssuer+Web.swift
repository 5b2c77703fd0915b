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
    struct WebState {
        var clients: [String: String] = [:]
        var codes: [String: WebCode] = [:]
        var user = WebUser(subject: "oidc-web-user", email: "web.user@example.com", name: "Web User")
        var authorizeFault = WebAuthorizeFault.none
        var tokenFault = WebTokenFault.none
        /// Id tokens of the token endpoint are HS256 with the client secret (LINE's web login),
        /// and discovery lists HS256.
        var hs256 = false
        var authMethods = ["client_secret_basic", "client_secret_post"]
        var tokenRequests = 0
    }

    struct WebCode {
        let clientID: String
        let redirectURI: String
        let challenge: String?
        let nonce: String?
        let user: WebUser
        let issuedAt: Date
        var used = false
    }

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
        web.withLock { $0.clients[clientID] = secret }
    }

    public var webUser: WebUser {
        get { web.withLock { $0.user } }
        set { web.withLock { $0.user = newValue } }
    }

    public var webAuthorizeFault: WebAuthorizeFault {
        get { web.withLock { $0.authorizeFault } }
        set { web.withLock { $0.authorizeFault = newValue } }
    }

    public var webTokenFault: WebTokenFault {
        get { web.withLock { $0.tokenFault } }
        set {
            web.withLock { $0.tokenFault = newValue }
            changeFaults { _ in }
        }
    }

    /// HS256 id tokens from the token endpoint (and HS256 in discovery).
    public var webHS256: Bool {
        get { web.withLock { $0.hs256 } }
        set { web.withLock { $0.hs256 = newValue } }
    }

    /// `token_endpoint_auth_methods_supported`.
    public var webAuthMethods: [String] {
        get { web.withLock { $0.authMethods } }
        set { web.withLock { $0.authMethods = newValue } }
    }

    /// Requests received at the token endpoint.
    public var webTokenRequests: Int { web.withLock { $0.tokenRequests } }

    /// Where the authorize endpoint sends the browser for these query parameters: the redirect
    /// URI with `code` and `state` (or `error`); nil for a request the issuer would not take.
    func authorizeRedirect(_ query: [String: String], now: Date = Date()) -> String? {
        guard query["response_type"] == "code", let clientID = query["client_id"], let redirectURI = query["redirect_uri"],
            (query["scope"] ?? "").split(separator: " ").contains("openid")
        else { return nil }
        let challenge = query["code_challenge"]
        if challenge != nil, query["code_challenge_method"] != "S256" { return nil }
        let state = query["state"] ?? ""
        let separator = redirectURI.contains("?") ? "&" : "?"
        return web.withLock { web -> String? in
            guard web.clients[clientID] != nil else { return nil }
            if web.authorizeFault == .deny { return redirectURI + separator + Self.form([("error", "access_denied"), ("state", state)]) }
            let code = "oc" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            web.codes[code] = WebCode(
                clientID: clientID, redirectURI: redirectURI, challenge: challenge, nonce: query["nonce"], user: web.user, issuedAt: now)
            return redirectURI + separator + Self.form([("code", code), ("state", state)])
        }
    }

    /// The token endpoint's answer to a form (and its `Authorization` header), for a mock served
    /// at `base`. `count`: count the request.
    func tokenAnswer(form: [String: String], authorization: String?, base: String, count: Bool, now: Date = Date()) throws -> Answer {
        let (fault, generation, hs256) = web.withLock { web in
            if count { web.tokenRequests += 1 }
            return (web.tokenFault, state.withLock { $0.faultGeneration }, web.hs256)
        }
        switch fault {
        case .status(let status): return .response(status: status, body: Data(#"{"error":"server_error"}"#.utf8))
        case .hang: return .hang(generation: generation)
        case .none, .wrongNonce: break
        }
        var clientID = form["client_id"]
        var secret = form["client_secret"]
        if let authorization, authorization.hasPrefix("Basic "),
            let decoded = Data(base64Encoded: String(authorization.dropFirst(6))).map({ String(decoding: $0, as: UTF8.self) }),
            let colon = decoded.firstIndex(of: ":")
        {
            clientID = String(decoded[..<colon]).removingPercentEncoding
            secret = String(decoded[decoded.index(after: colon)...]).removingPercentEncoding
        }
        func error(_ status: Int, _ code: String) -> Answer { .response(status: status, body: Data(#"{"error":"\#(code)"}"#.utf8)) }
        guard let clientID, let secret, web.withLock({ $0.clients[clientID] }) == secret else { return error(401, "invalid_client") }
        guard form["grant_type"] == "authorization_code", let code = form["code"] else { return error(400, "invalid_request") }
        let issued = web.withLock { web -> WebCode? in
            guard var entry = web.codes[code], !entry.used, entry.clientID == clientID, now.timeIntervalSince(entry.issuedAt) < 300 else {
                return nil
            }
            entry.used = true
            web.codes[code] = entry
            return entry
        }
        guard let issued, form["redirect_uri"] == issued.redirectURI else { return error(400, "invalid_grant") }
        if let challenge = issued.challenge {
            guard let verifier = form["code_verifier"], Self.s256(verifier) == challenge else { return error(400, "invalid_grant") }
        }
        let claims = self.claims(
            base: base, subject: issued.user.subject, audience: clientID, nonce: fault == .wrongNonce ? "not-the-nonce" : issued.nonce,
            email: issued.user.email, name: issued.user.name, now: now)
        let idToken = hs256 ? try Self.hs256(claims, secret: secret) : try mint(claims)
        let body = try JSONSerialization.data(
            withJSONObject: ["access_token": "at" + UUID().uuidString, "token_type": "Bearer", "expires_in": 3600, "id_token": idToken],
            options: [.sortedKeys])
        return .response(status: 200, body: body)
    }

    /// An HS256 JWT signed with the client secret (LINE's web login tokens).
    public static func hs256(_ claims: [String: JWTHeaderField], secret: String) throws -> String {
        let header = try MockKeyRing.json(["alg": .string("HS256"), "typ": .string("JWT")])
        let input = "\(base64URL(header)).\(base64URL(try MockKeyRing.json(claims)))"
        let mac = HMAC<SHA256>.authenticationCode(for: Data(input.utf8), using: SymmetricKey(data: Data(secret.utf8)))
        return "\(input).\(base64URL(Data(mac)))"
    }

    static func s256(_ verifier: String) -> String { base64URL(Data(SHA256.hash(data: Data(verifier.utf8)))) }

    static func form(_ pairs: [(String, String)]) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return pairs.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }.joined(separator: "&")
    }
}

import Crypto
import Foundation
import JWTKit
import Synchronization

/// The clients, codes, consenting person and faults of a mock provider's authorization code
/// flow (``MockOIDCIssuer`` and ``MockGoogleIdP`` each have one): the authorize endpoint's
/// redirect and the token endpoint's checks of the client's secret (HTTP Basic or in the form),
/// the code, the redirect URI and the PKCE verifier (S256).
public final class MockCodeFlow: Sendable {
    struct State {
        var clients: [String: String] = [:]
        var codes: [String: Code] = [:]
        var user = MockOIDCIssuer.WebUser(subject: "oidc-web-user", email: "web.user@example.com", name: "Web User")
        var authorizeFault = MockOIDCIssuer.WebAuthorizeFault.none
        var tokenFault = MockOIDCIssuer.WebTokenFault.none
        /// Id tokens of the token endpoint are HS256 with the client secret (LINE's web login),
        /// and discovery lists HS256.
        var hs256 = false
        var authMethods = ["client_secret_basic", "client_secret_post"]
        var tokenRequests = 0
        /// Each consent is a new person (a benchmark's every sign-in new).
        var newPersonEachTime = false
        /// Each consent is the next of this many people in turn (0: off).
        var people = 0
        var consents = 0
    }

    struct Code {
        let clientID: String
        let redirectURI: String
        let challenge: String?
        let nonce: String?
        let user: MockOIDCIssuer.WebUser
        let issuedAt: Date
        var used = false
        /// The id token the token endpoint answers, minted at the authorize step (so that a
        /// benchmark's callback phase does not carry the mock's signing); nil: minted then.
        var idToken: String? = nil
    }

    /// A code the token endpoint accepted: whom and what to mint the id token for.
    struct Redeemed {
        let clientID: String
        let secret: String
        let nonce: String?
        let user: MockOIDCIssuer.WebUser
        /// Minted at the authorize step, when the code was issued.
        let idToken: String?
    }

    let state = Mutex(State())

    public init() {}

    /// Each consent on the authorize endpoint is a new person (`mock-idp serve --web-new-person`).
    public var newPersonEachTime: Bool {
        get { state.withLock { $0.newPersonEachTime } }
        set { state.withLock { $0.newPersonEachTime = newValue } }
    }

    /// Each consent on the authorize endpoint is the next of `people` people in turn, so a
    /// benchmark's second round signs the first round's people in again (`mock-idp serve
    /// --web-people N`; 0: off).
    public var people: Int {
        get { state.withLock { $0.people } }
        set { state.withLock { $0.people = newValue } }
    }

    /// Who consents on the authorize endpoint.
    public var user: MockOIDCIssuer.WebUser {
        get { state.withLock { $0.user } }
        set { state.withLock { $0.user = newValue } }
    }

    /// Where the authorize endpoint sends the browser for these query parameters: the redirect
    /// URI with `code` and `state` (or `error`); nil for a request the provider would not take.
    /// `mint`: the id token for the code, minted now (nil: at the token endpoint).
    func authorizeRedirect(
        _ query: [String: String], now: Date = Date(),
        mint: ((_ clientID: String, _ nonce: String?, _ user: MockOIDCIssuer.WebUser) -> String?)? = nil
    ) -> String? {
        guard query["response_type"] == "code", let clientID = query["client_id"], let redirectURI = query["redirect_uri"],
            (query["scope"] ?? "").split(separator: " ").contains("openid")
        else { return nil }
        let challenge = query["code_challenge"]
        if challenge != nil, query["code_challenge_method"] != "S256" { return nil }
        let requestState = query["state"] ?? ""
        let separator = redirectURI.contains("?") ? "&" : "?"
        let issued = state.withLock { web -> (location: String, code: String?, user: MockOIDCIssuer.WebUser)? in
            guard web.clients[clientID] != nil else { return nil }
            if web.authorizeFault == .deny {
                return (redirectURI + separator + Self.form([("error", "access_denied"), ("state", requestState)]), nil, web.user)
            }
            let code = "oc" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            var user =
                web.newPersonEachTime
                ? MockOIDCIssuer.WebUser(
                    subject: "p" + code.dropFirst(2), email: "web.\(code.dropFirst(2).prefix(12))@example.com", name: "Web Person")
                : web.user
            if web.people > 0 {
                let index = web.consents % web.people
                web.consents += 1
                user = MockOIDCIssuer.WebUser(subject: "person\(index)", email: "web.\(index)@example.com", name: "Web Person")
            }
            web.codes[code] = Code(
                clientID: clientID, redirectURI: redirectURI, challenge: challenge, nonce: query["nonce"], user: user, issuedAt: now)
            return (redirectURI + separator + Self.form([("code", code), ("state", requestState)]), code, user)
        }
        guard let issued else { return nil }
        if let code = issued.code, let idToken = mint?(clientID, query["nonce"], issued.user) {
            state.withLock { $0.codes[code]?.idToken = idToken }
        }
        return issued.location
    }

    /// The token endpoint's checks of a form (and its `Authorization` header): the redeemed
    /// code, or the error answer (status, OAuth error code).
    func redeem(form: [String: String], authorization: String?, now: Date = Date()) -> Result<Redeemed, TokenError> {
        // Only the client authentication methods discovery lists are taken.
        let methods = state.withLock { $0.authMethods }
        if authorization != nil, !methods.contains("client_secret_basic") {
            return .failure(TokenError(status: 401, code: "invalid_client"))
        }
        if form["client_secret"] != nil, !methods.contains("client_secret_post") {
            return .failure(TokenError(status: 401, code: "invalid_client"))
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
        guard let clientID, let secret, state.withLock({ $0.clients[clientID] }) == secret else {
            return .failure(TokenError(status: 401, code: "invalid_client"))
        }
        guard form["grant_type"] == "authorization_code", let code = form["code"] else {
            return .failure(TokenError(status: 400, code: "invalid_request"))
        }
        let issued = state.withLock { web -> Code? in
            guard var entry = web.codes[code], !entry.used, entry.clientID == clientID, now.timeIntervalSince(entry.issuedAt) < 300 else {
                return nil
            }
            entry.used = true
            web.codes[code] = entry
            return entry
        }
        guard let issued, form["redirect_uri"] == issued.redirectURI else {
            return .failure(TokenError(status: 400, code: "invalid_grant"))
        }
        if let challenge = issued.challenge {
            guard let verifier = form["code_verifier"], Self.s256(verifier) == challenge else {
                return .failure(TokenError(status: 400, code: "invalid_grant"))
            }
        }
        let wrongNonce = state.withLock { $0.tokenFault == .wrongNonce }
        return .success(
            Redeemed(
                clientID: clientID, secret: secret, nonce: wrongNonce ? "not-the-nonce" : issued.nonce, user: issued.user,
                idToken: wrongNonce ? nil : issued.idToken))
    }

    struct TokenError: Error {
        let status: Int
        let code: String
        var body: Data { Data(#"{"error":"\#(code)"}"#.utf8) }
    }

    /// The token endpoint's 200 body around `idToken`.
    static func tokenBody(idToken: String) -> Data {
        MockJSON.object([
            ("access_token", .string("at" + UUID().uuidString)), ("token_type", .string("Bearer")), ("expires_in", .int(3600)),
            ("id_token", .string(idToken)),
        ])
    }

    static func s256(_ verifier: String) -> String { base64URL(Data(SHA256.hash(data: Data(verifier.utf8)))) }

    static func form(_ pairs: [(String, String)]) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return pairs.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }.joined(separator: "&")
    }
}

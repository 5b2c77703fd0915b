import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import NIOCore

/// Each tenant's OpenID Provider (issue 42 §2, decision 0082), served on the router directly:
/// its answers are redirects, HTML pages and OAuth's own JSON, not the generated types.
/// - `GET`/`POST /t/{tenant}/authorize`: the sign-in page, or straight to a provider;
/// - `POST /t/{tenant}/token`: the code and refresh grants (form body, RFC 6749 errors);
/// - `GET`/`POST /t/{tenant}/userinfo`: the person's claims for a bearer access token;
/// - `GET`/`POST /t/{tenant}/logout`: RP-initiated logout;
/// - `GET /assets/sign-in.css`: the page's stylesheet.
struct OpenIDProviderRoute: Sendable {
    static let authorizePath = "/t/:tenant/authorize"
    static let tokenPath = "/t/:tenant/token"
    static let userinfoPath = "/t/:tenant/userinfo"
    static let logoutPath = "/t/:tenant/logout"
    static let operations: [GeneratedRoutes.Operation] = [
        .init(method: .get, path: "/t/{tenant}/authorize"), .init(method: .post, path: "/t/{tenant}/authorize"),
        .init(method: .post, path: "/t/{tenant}/token"), .init(method: .get, path: "/t/{tenant}/userinfo"),
        .init(method: .post, path: "/t/{tenant}/userinfo"), .init(method: .get, path: "/t/{tenant}/logout"),
        .init(method: .post, path: "/t/{tenant}/logout"), .init(method: .get, path: SignInPageRenderer.stylesheetPath),
    ]

    let services: BrokerServices
    let maxBodyBytes: Int
    var renderer: SignInPageRenderer { .shared }

    // MARK: Authorize

    func authorize(_ request: Request, context: BrokerRequestContext) async -> Response {
        guard let pairs = await browserParameters(request) else { return page(status: .badRequest, .repeatedParameter, request) }
        let (fields, repeated) = Self.fields(pairs)
        let language = SignInPageRenderer.Language.chosen(uiLocales: fields["ui_locales"], acceptLanguage: request.headers[.acceptLanguage])
        let outcome = await services.authorization.authorize(
            tenantSlug: context.parameters.get("tenant") ?? "", fields: fields, repeated: repeated,
            context: HTTPCaller(request, context: context).context)
        switch outcome {
        case .redirect(let location):
            var headers = Self.pageHeaders
            headers[.location] = location
            return Response(status: .seeOther, headers: headers)
        case .errorPage(let status, let message):
            return html(renderer.render(message, language: language), status: HTTPResponse.Status(code: status))
        case .signInPage(let model):
            guard let html = renderer.render(model, language: language) else {
                return self.html(
                    renderer.render(AuthorizationService.ErrorPageMessage.unavailable, language: language), status: .internalServerError)
            }
            return self.html(html, status: .ok)
        }
    }

    private func page(status: HTTPResponse.Status, _ message: AuthorizationService.ErrorPageMessage, _ request: Request) -> Response {
        let language = SignInPageRenderer.Language.chosen(uiLocales: nil, acceptLanguage: request.headers[.acceptLanguage])
        return html(renderer.render(message, language: language), status: status)
    }

    /// What a guard answers one of these endpoints with before the route runs (a request past
    /// its deadline: ``RequestDeadlineResponder``; over the public rate limit:
    /// ``PublicRateLimitMiddleware``), in the endpoint's own form: RFC 6749 JSON `error` at the
    /// token and userinfo endpoints, a page saying `message` at the authorization and end-session
    /// endpoints, with `error`'s status; nil for any other path.
    static func guardAnswer(_ request: Request, _ error: TokenEndpointError, page message: AuthorizationService.ErrorPageMessage)
        -> Response?
    {
        let path = request.uri.path
        guard path.hasPrefix("/t/") else { return nil }
        if path.hasSuffix("/token") || path.hasSuffix("/userinfo") { return oauthError(error, bearer: path.hasSuffix("/userinfo")) }
        guard path.hasSuffix("/authorize") || path.hasSuffix("/logout") else { return nil }
        return html(
            SignInPageRenderer.shared.render(
                message, language: .chosen(uiLocales: nil, acceptLanguage: request.headers[.acceptLanguage])),
            status: HTTPResponse.Status(code: error.status))
    }

    private func html(_ text: String, status: HTTPResponse.Status) -> Response { Self.html(text, status: status) }

    private static func html(_ text: String, status: HTTPResponse.Status) -> Response {
        var headers = Self.pageHeaders
        headers[.contentType] = "text/html; charset=utf-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    /// Headers of every page and redirect of the authorization endpoint: never cached or framed,
    /// no referrer, no script; styles only from the broker's own origin.
    static let pageHeaders: HTTPFields = [
        .cacheControl: "no-store", .init("Referrer-Policy")!: "no-referrer", .init("X-Frame-Options")!: "DENY",
        .contentSecurityPolicy: "default-src 'none'; style-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        .init("X-Content-Type-Options")!: "nosniff",
    ]

    func stylesheet(_ request: Request, context: BrokerRequestContext) -> Response {
        Response(
            status: .ok,
            headers: [
                .contentType: "text/css; charset=utf-8", .cacheControl: "public, max-age=3600",
                .init("X-Content-Type-Options")!: "nosniff",
            ],
            body: .init(byteBuffer: ByteBuffer(string: SignInPageRenderer.stylesheet)))
    }

    // MARK: Token

    func token(_ request: Request, context: BrokerRequestContext) async -> Response {
        guard Self.isForm(request) else {
            return Self.oauthError(.invalidRequest("The body must be application/x-www-form-urlencoded."))
        }
        guard let body = try? await Self.body(request, maxBodyBytes: maxBodyBytes) else {
            return Self.oauthError(.invalidRequest("The body could not be read."))
        }
        let (fields, repeated) = Self.fields(Self.formPairs(body))
        if let name = repeated.sorted().first {
            return Self.oauthError(.invalidRequest("\(name) is given more than once (RFC 6749 §3.2)."))
        }
        let credentials: TokenService.ClientCredentials
        switch Self.clientCredentials(authorization: request.headers[.authorization], fields: fields) {
        case .failure(let error): return Self.oauthError(error, basic: request.headers[.authorization] != nil)
        case .success(let found): credentials = found
        }
        do {
            let answer = try await services.tokenEndpoint.token(
                tenantSlug: context.parameters.get("tenant") ?? "", credentials: credentials, fields: fields,
                context: HTTPCaller(request, context: context).context)
            var writer = JSONWriter(capacity: 2_048)
            writer.beginObject()
            writer.member("access_token", answer.accessToken)
            writer.member("token_type", "Bearer")
            writer.member("expires_in", answer.expiresIn)
            writer.memberIfPresent("refresh_token", answer.refreshToken)
            writer.memberIfPresent("id_token", answer.idToken)
            writer.member("scope", answer.scope)
            writer.memberIfPresent("issued_token_type", answer.issuedTokenType)
            writer.endObject()
            return Self.json(writer.bytes, status: .ok)
        } catch {
            return Self.oauthError(error, basic: credentials.method == .basic)
        }
    }

    /// The client's credentials: HTTP Basic (the id and secret form-encoded, RFC 6749 §2.3.1),
    /// or `client_id` and `client_secret` in the body; never both; a public client sends its
    /// `client_id` alone.
    static func clientCredentials(authorization: String?, fields: [String: String]) -> Result<
        TokenService.ClientCredentials, TokenEndpointError
    > {
        if let authorization {
            guard authorization.prefix(6).lowercased() == "basic ",
                let decoded = Data(base64Encoded: String(authorization.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
                let text = String(data: decoded, encoding: .utf8), let colon = text.firstIndex(of: ":"),
                let id = String(text[..<colon]).removingPercentEncoding,
                let secret = String(text[text.index(after: colon)...]).removingPercentEncoding
            else { return .failure(.invalidClient("The Authorization header is not HTTP Basic with the client's id and secret.")) }
            guard fields["client_secret"] == nil else {
                return .failure(.invalidRequest("Use one way of client authentication, not both (RFC 6749 §2.3)."))
            }
            if let bodyID = fields["client_id"], bodyID != id {
                return .failure(.invalidRequest("client_id in the body differs from the Authorization header's."))
            }
            return .success(.init(clientID: id, secret: secret, method: .basic))
        }
        guard let id = fields["client_id"] else {
            return .failure(.invalidClient("The client did not authenticate: send HTTP Basic, or client_id (and client_secret)."))
        }
        if let secret = fields["client_secret"] { return .success(.init(clientID: id, secret: secret, method: .post)) }
        return .success(.init(clientID: id, secret: nil, method: .none))
    }

    // MARK: Logout

    func logout(_ request: Request, context: BrokerRequestContext) async -> Response {
        guard let pairs = await browserParameters(request) else {
            return html(renderer.render(LogoutService.Outcome.refused(.invalidHint), language: .en), status: .badRequest)
        }
        let (fields, repeated) = Self.fields(pairs)
        let language = SignInPageRenderer.Language.chosen(uiLocales: fields["ui_locales"], acceptLanguage: request.headers[.acceptLanguage])
        guard repeated.isEmpty else {
            return html(renderer.render(LogoutService.Outcome.refused(.invalidHint), language: language), status: .badRequest)
        }
        let outcome = await services.logout.logout(
            tenantSlug: context.parameters.get("tenant") ?? "", fields: fields, context: HTTPCaller(request, context: context).context)
        switch outcome {
        case .redirect(let location):
            var headers = Self.pageHeaders
            headers[.location] = location
            return Response(status: .seeOther, headers: headers)
        case .signedOut: return html(renderer.render(outcome, language: language), status: .ok)
        case .refused(.unknownTenant): return html(renderer.render(outcome, language: language), status: .notFound)
        case .refused: return html(renderer.render(outcome, language: language), status: .badRequest)
        case .unavailable: return html(renderer.render(outcome, language: language), status: .serviceUnavailable)
        }
    }

    // MARK: Userinfo

    func userinfo(_ request: Request, context: BrokerRequestContext) async -> Response {
        guard let authorization = request.headers[.authorization], authorization.prefix(7).lowercased() == "bearer " else {
            var headers = Self.jsonHeaders
            headers[.wwwAuthenticate] = "Bearer"
            return Response(status: .unauthorized, headers: headers)
        }
        let token = String(authorization.dropFirst(7)).trimmingCharacters(in: .whitespaces)
        do {
            let (sub, claims) = try await services.userInfo.claims(
                tenantSlug: context.parameters.get("tenant") ?? "", accessToken: token,
                context: HTTPCaller(request, context: context).context)
            var writer = JSONWriter(capacity: 512)
            writer.beginObject()
            writer.member("sub", sub)
            writer.memberIfPresent("email", claims.email)
            if let verified = claims.emailVerified { writer.member("email_verified", verified) }
            writer.memberIfPresent("name", claims.name)
            writer.memberIfPresent("given_name", claims.givenName)
            writer.memberIfPresent("family_name", claims.familyName)
            writer.endObject()
            return Self.json(writer.bytes, status: .ok)
        } catch {
            return Self.oauthError(error, bearer: true)
        }
    }

    // MARK: Support

    static let jsonHeaders: HTTPFields = [
        .contentType: "application/json; charset=utf-8", .cacheControl: "no-store", .init("Pragma")!: "no-cache",
    ]

    static func json(_ bytes: [UInt8], status: HTTPResponse.Status) -> Response {
        Response(status: status, headers: jsonHeaders, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// An RFC 6749 §5.2 error (RFC 6750 §3 for a bearer token): `WWW-Authenticate` with a 401.
    static func oauthError(_ error: TokenEndpointError, basic: Bool = false, bearer: Bool = false) -> Response {
        var writer = JSONWriter(capacity: 256)
        writer.beginObject()
        writer.member("error", error.error)
        writer.member("error_description", error.description)
        writer.endObject()
        var headers = jsonHeaders
        if error.status == 401 || error.status == 403 {
            if bearer {
                headers[.wwwAuthenticate] = "Bearer error=\"\(error.error)\""
            } else if basic || error.status == 401 {
                headers[.wwwAuthenticate] = "Basic"
            }
        }
        if error.status == 503 || error.status == 429 { headers[.retryAfter] = "1" }
        return Response(
            status: HTTPResponse.Status(code: error.status), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: writer.bytes)))
    }

    static func oauthError(_ error: any Error, basic: Bool = false, bearer: Bool = false) -> Response {
        oauthError(error as? TokenEndpointError ?? .serverError, basic: basic, bearer: bearer)
    }

    static func isForm(_ request: Request) -> Bool {
        MediaType.names(request.headers[.contentType], MediaType.form)
    }

    static func body(_ request: Request, maxBodyBytes: Int) async throws -> String {
        var request = request
        let buffer = try await request.collectBody(upTo: maxBodyBytes)
        return String(decoding: buffer.readableBytesView, as: UTF8.self)
    }

    /// The parameters a browser sent: the query of a `GET`, the form of a `POST` (nil when the
    /// body is not a form or cannot be read).
    private func browserParameters(_ request: Request) async -> [(String, String)]? {
        guard request.method == .post else { return Self.formPairs(request.uri.query ?? "") }
        guard Self.isForm(request), let body = try? await Self.body(request, maxBodyBytes: maxBodyBytes) else { return nil }
        return Self.formPairs(body)
    }

    /// The name and value pairs of a form (or a query), in order, repeats kept (``FormBody``).
    static func formPairs(_ text: String) -> [(String, String)] { FormBody.pairs(text.utf8) }

    /// The first value of each name, and the names given more than once (an empty value counts
    /// as not given, RFC 6749 §3.1).
    static func fields(_ pairs: [(String, String)]) -> (fields: [String: String], repeated: Set<String>) {
        var fields: [String: String] = [:]
        var repeated = Set<String>()
        for (name, value) in pairs where !value.isEmpty {
            if fields[name] == nil { fields[name] = value } else { repeated.insert(name) }
        }
        return (fields, repeated)
    }
}

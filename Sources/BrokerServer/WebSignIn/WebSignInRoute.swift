import BrokerAPI
import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import NIOCore
import Providers

/// Sign-in on the web (issue 22, decision 0038), served on the router directly:
/// - `POST /v1/sign-in/{provider}/web/start` and `.../web/exchange` (API key, `sessions`), JSON
///   read with the one strict parser as the native sign-in route reads its body;
/// - `POST /apple/callback` (Apple's `form_post`) and `GET /oidc/callback` (public), which
///   answer the person's browser: 303 to the return URL, or a plain page that shows no token,
///   email or internal detail.
struct WebSignInRoute: Sendable {
    static let startPath = "/v1/sign-in/:provider/web/start"
    static let exchangePath = "/v1/sign-in/:provider/web/exchange"
    static let appleCallbackPath = "/apple/callback"
    static let oidcCallbackPath = "/oidc/callback"
    static let operations: [GeneratedRoutes.Operation] = [
        .init(method: .post, path: "/v1/sign-in/{provider}/web/start"), .init(method: .post, path: "/v1/sign-in/{provider}/web/exchange"),
        .init(method: .post, path: appleCallbackPath), .init(method: .get, path: oidcCallbackPath),
    ]

    let handlers: APIHandlers
    let maxBodyBytes: Int

    var services: BrokerServices { handlers.services }

    // MARK: API

    func start(_ request: Request, context: BrokerRequestContext) async throws -> Response {
        let provider = try Self.provider(context)
        let object = try await Self.jsonObject(request, maxBodyBytes: maxBodyBytes)
        let body: (clientID: String?, returnURL: String, state: String?, intent: SignInIntent)
        do {
            body = (
                try ContractReader.optional("client_id", in: object), try ContractReader.required("return_url", in: object),
                try ContractReader.optional("state", in: object), try ContractReader.choice("intent", in: object) ?? .auto
            )
        } catch {
            throw SignInRoute.contractMismatch(error.description)
        }
        guard body.returnURL.utf8.count <= WebSignInService.maxReturnURL else {
            throw BrokerError.invalidArgument("return_url is longer than \(WebSignInService.maxReturnURL) bytes.")
        }
        if let state = body.state {
            guard state.utf8.count <= WebSignInService.maxCallerState,
                !state.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
            else {
                throw BrokerError.invalidArgument(
                    "state must be at most \(WebSignInService.maxCallerState) bytes without control characters.")
            }
        }
        let http = HTTPCaller(request, context: context)
        let caller = try await handlers.authenticator.authenticate(http, requiring: .sessions)
        let started: WebSignInService.Started
        do {
            started = try await services.webSignIn.start(
                tenant: caller.tenant, provider: provider, clientID: body.clientID, returnURL: body.returnURL, callerState: body.state,
                intent: body.intent, context: http.context)
        } catch let failure as WebSignInFailure {
            throw WebSignInProblems.problem(failure, tenant: caller.tenant)
        } catch let failure as ProviderFailure {
            throw SignInProblems.problem(failure, tenant: caller.tenant)
        } catch let failure as SignInFailure {
            throw SignInProblems.problem(failure)
        }
        var writer = JSONWriter(capacity: 1_024)
        writer.beginObject()
        writer.member("authorize_url", started.authorizeURL)
        writer.member("expires_at", ISO8601Transcoder.string(started.expiresAt))
        writer.endObject()
        return Self.json(writer.bytes)
    }

    func exchange(_ request: Request, context: BrokerRequestContext) async throws -> Response {
        let provider = try Self.provider(context)
        let object = try await Self.jsonObject(request, maxBodyBytes: maxBodyBytes)
        let code: String
        do {
            code = try ContractReader.required("code", in: object)
        } catch {
            throw SignInRoute.contractMismatch(error.description)
        }
        let http = HTTPCaller(request, context: context)
        let caller = try await handlers.authenticator.authenticate(http, requiring: .sessions)
        let outcome: SignInOutcome
        do {
            outcome = try await services.webSignIn.exchange(tenant: caller.tenant, provider: provider, code: code, context: http.context)
        } catch let failure as WebSignInFailure {
            throw WebSignInProblems.problem(failure, tenant: caller.tenant)
        } catch let failure as SignInFailure {
            throw SignInProblems.problem(failure)
        }
        return Self.json(Components.Schemas.SignInResponse(outcome).json)
    }

    // MARK: Callbacks

    /// Apple's `form_post`: `state`, `code`, `id_token`, `user` (first time) or `error`.
    func appleCallback(_ request: Request, context: BrokerRequestContext) async -> Response {
        var request = request
        guard MediaType.names(request.headers[.contentType], MediaType.form), let body = try? await request.collectBody(upTo: maxBodyBytes)
        else {
            return Self.page(.badRequest)
        }
        let form = Self.formFields(body)
        let outcome = await services.webSignIn.callback(
            route: .apple, state: form["state"], providerError: form["error"],
            response: AuthorizationResponse(code: form["code"], idToken: form["id_token"], user: form["user"]),
            context: HTTPCaller(request, context: context).context)
        return Self.answer(outcome)
    }

    /// An OpenID Connect provider's redirect: `state`, `code` or `error`.
    func oidcCallback(_ request: Request, context: BrokerRequestContext) async -> Response {
        let query = request.uri.queryParameters
        let outcome = await services.webSignIn.callback(
            route: .oidc, state: query["state"].map(String.init), providerError: query["error"].map(String.init),
            response: AuthorizationResponse(code: query["code"].map(String.init)), context: HTTPCaller(request, context: context).context)
        return Self.answer(outcome)
    }

    /// The fields of an `application/x-www-form-urlencoded` body, the first of each name (``FormBody``).
    static func formFields(_ body: ByteBuffer) -> [String: String] { FormBody.firstFields(body.readableBytesView) }

    static func answer(_ outcome: WebSignInService.CallbackOutcome) -> Response {
        switch outcome {
        case .redirect(let location):
            var headers = pageHeaders
            headers[.location] = location
            return Response(status: .seeOther, headers: headers)
        case .invalidState: return page(.badRequest)
        case .unavailable: return page(.serviceUnavailable)
        }
    }

    /// Headers of every callback answer: never cached, never framed, no referrer carrying the
    /// code onwards, no script.
    static let pageHeaders: HTTPFields = [
        .cacheControl: "no-store", .init("Referrer-Policy")!: "no-referrer", .init("X-Frame-Options")!: "DENY",
        .contentSecurityPolicy: "default-src 'none'; frame-ancestors 'none'", .init("X-Content-Type-Options")!: "nosniff",
    ]

    /// A plain page: what the person can do, nothing more.
    static func page(_ status: HTTPResponse.Status) -> Response {
        let message =
            status == .serviceUnavailable
            ? "Sign-in is unavailable for a moment. Go back to the site and try again."
            : "This sign-in link has expired or was already used. Go back to the site and sign in again."
        let html = "<!doctype html><html><head><meta charset=\"utf-8\"><title>Sign-in</title></head><body><p>\(message)</p></body></html>\n"
        var headers = pageHeaders
        headers[.contentType] = "text/html; charset=utf-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    // MARK: Support

    static func provider(_ context: BrokerRequestContext) throws -> ProviderID {
        let name = context.parameters.get("provider") ?? ""
        guard let provider = ProviderID(rawValue: name) else { throw SignInProblems.problem(.unknownProvider(name)) }
        return provider
    }

    static func jsonObject(_ request: Request, maxBodyBytes: Int) async throws -> [String: JSONValue] {
        try SignInRoute.checkContentType(request.headers[.contentType])
        var request = request
        let bytes = try await request.collectBody(upTo: maxBodyBytes)
        do {
            return try ContractReader.object(try JSONValue.parse(bytes.readableBytesView))
        } catch {
            throw SignInRoute.contractMismatch("the body is not a JSON object (or repeats a member name)")
        }
    }

    static func json(_ bytes: [UInt8]) -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}

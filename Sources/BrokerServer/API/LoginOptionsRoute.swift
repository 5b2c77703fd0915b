import BrokerAPI
import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// `GET /v1/login-options?platform=ios|android|web|macos`, served on the router directly: the
/// body has members the contract makes always present (`policy`, `nonce_mode`,
/// `start_endpoint`: null when they do not apply), which the generated encoding would omit. It
/// is called on every app launch, so each tenant's body per platform is kept rendered
/// (``LoginCatalogStore``) until an operator change clears it.
struct LoginOptionsRoute: Sendable {
    /// How long a client may keep an answer (`Cache-Control: private, max-age=…`).
    static let clientCacheSeconds = 60
    static let operation = GeneratedRoutes.Operation(method: .get, path: "/v1/login-options")

    let handlers: APIHandlers

    func respond(_ request: Request, context: BrokerRequestContext) async throws -> Response {
        guard let raw = request.uri.queryParameters["platform"] else {
            throw SignInRoute.contractMismatch("missing query parameter 'platform'")
        }
        guard let platform = ProviderPlatform(rawValue: String(raw)) else {
            throw SignInRoute.contractMismatch("query parameter 'platform' is not one of ios, android, web, macos")
        }
        let body = try await handlers.loginOptionsJSON(platform: platform, as: HTTPCaller(request, context: context))
        return Response(
            status: .ok,
            headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "private, max-age=\(Self.clientCacheSeconds)"],
            body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}

extension APIHandlers {
    func getLoginOptions(_ input: Operations.GetLoginOptions.Input) async throws -> Operations.GetLoginOptions.Output {
        guard let platform = ProviderPlatform(rawValue: input.query.platform.rawValue) else {
            throw SignInRoute.contractMismatch("query parameter 'platform' is not one of ios, android, web, macos")
        }
        let json = try await loginOptionsJSON(platform: platform, as: currentCaller)
        return .ok(.init(body: .json(try JSONDecoder().decode(Components.Schemas.LoginOptions.self, from: Data(json)))))
    }

    /// The rendered body for the caller's tenant (API key with the `sessions` scope).
    func loginOptionsJSON(platform: ProviderPlatform, as http: HTTPCaller) async throws -> [UInt8] {
        let caller = try await authenticator.authenticate(http, requiring: .sessions)
        let slug = caller.tenant.slug.rawValue
        return try await services.loginCatalogs.renderedOptions(for: caller.tenant, on: platform) { $0.json(tenant: slug) }
    }
}

extension LoginOptions {
    func json(tenant: String) -> [UInt8] {
        var writer = JSONWriter(capacity: 512)
        writer.beginObject()
        writer.member("platform", platform.rawValue)
        writer.key("options")
        writer.beginArray()
        for option in options {
            writer.beginObject()
            writer.member("provider", option.provider.rawValue)
            writer.member("type", option.type.rawValue)
            writer.member("display_name", option.displayName)
            writer.member("client_id", option.clientID)
            writer.key("client_ids")
            writer.beginArray()
            for id in option.clientIDs { writer.string(id) }
            writer.endArray()
            writer.member("nonce_mode", option.nonceMode)
            writer.member("nonce_required", option.nonceRequired)
            writer.member("qualifies", option.qualifies)
            writer.member("start_endpoint", option.startEndpoint)
            writer.endObject()
        }
        writer.endArray()
        writer.key("policy")
        if let violation {
            writer.beginObject()
            writer.member("guideline", "4.8")
            writer.member("status", "violation")
            writer.member("mode", mode.rawValue)
            writer.key("non_qualifying_providers")
            writer.beginArray()
            for provider in violation { writer.string(provider.rawValue) }
            writer.endArray()
            writer.member(
                "detail",
                "App Store Review Guideline 4.8: \(violation.map(\.rawValue).joined(separator: " and ")) "
                    + "\(violation.count == 1 ? "is" : "are") offered on \(platform.rawValue) without an equivalent "
                    + "privacy-preserving login option. The operator can see it with: broker policy check --tenant \(tenant)")
            writer.endObject()
        } else {
            writer.null()
        }
        writer.endObject()
        return writer.bytes
    }
}

import BrokerApplication
import BrokerCore
import Hummingbird

/// The per-address token bucket of the public routes, the ones without an API key: Apple's
/// callback and notifications, the OpenID Connect callback, each tenant's discovery document
/// and JWKS, and each tenant's OpenID Provider endpoints (authorize, token, userinfo, logout)
/// (`BROKER_PUBLIC_RATE_LIMIT`, decision 0048). Over it: 429 with `Retry-After`, before the
/// request's body is read: a problem `rate_limited`, or in the OpenID Provider's own forms (a page
/// for the browser's endpoints, RFC 6749 JSON for the token and userinfo endpoints). API routes
/// are limited per key instead.
struct PublicRateLimitMiddleware: RouterMiddleware {
    typealias Context = BrokerRequestContext
    let limiter: RequestLimiter

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let path = request.uri.path
        if Self.isPublic(path) {
            do {
                try limiter.admitPublic(client: context.clientAddress)
            } catch {
                guard Self.isOpenIDProvider(path), var answer = OpenIDProviderRoute.guardAnswer(request, .rateLimited, page: .rateLimited)
                else { throw error }
                RateLimitMetrics.refused(error.arguments["limit"] ?? "public_ip")
                answer.headers[.retryAfter] = error.arguments["retry_after"] ?? "1"
                return answer
            }
        }
        return try await next(request, context)
    }

    static let exactPaths: Set<String> = ["/apple/callback", "/apple/notifications", "/oidc/callback"]

    /// Whether `path` is one of the public routes.
    static func isPublic(_ path: String) -> Bool {
        exactPaths.contains(path) || isDiscovery(path) || isOpenIDProvider(path)
    }

    /// `/t/{tenant}/authorize`, `/token`, `/userinfo` and `/logout` (decision 0082).
    static func isOpenIDProvider(_ path: String) -> Bool {
        path.hasPrefix("/t/")
            && (path.hasSuffix("/authorize") || path.hasSuffix("/token") || path.hasSuffix("/userinfo") || path.hasSuffix("/logout"))
    }

    /// `/t/{tenant}/.well-known/jwks.json` and `/t/{tenant}/.well-known/openid-configuration`.
    static func isDiscovery(_ path: String) -> Bool {
        path.hasPrefix("/t/") && (path.hasSuffix("/.well-known/jwks.json") || path.hasSuffix("/.well-known/openid-configuration"))
    }
}

import BrokerApplication
import HTTPTypes
import Hummingbird

/// Headers every answer carries (decision 0048): `X-Content-Type-Options: nosniff`,
/// `Referrer-Policy: no-referrer`, `Strict-Transport-Security` when the broker's public URL is
/// https, and `Access-Control-Allow-Origin: *` on the discovery document and JWKS only (a
/// browser may read those; no other route answers a cross-origin page). The callback pages set
/// their own stricter policy (``WebSignInRoute``), which is kept. While the instance drains
/// (``Drain``), `Connection: close`: the client's next request goes to another instance.
struct EdgeHeadersMiddleware: RouterMiddleware {
    typealias Context = BrokerRequestContext
    /// Whether `BROKER_PUBLIC_URL` is https.
    let https: Bool
    let drain: Drain

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        var response = try await next(request, context)
        Self.decorate(&response.headers, path: request.uri.path, https: https)
        if drain.isDraining { response.headers[.connection] = "close" }
        return response
    }

    static func decorate(_ headers: inout HTTPFields, path: String, https: Bool) {
        if headers[.xContentTypeOptions] == nil { headers[.xContentTypeOptions] = "nosniff" }
        if headers[.referrerPolicy] == nil { headers[.referrerPolicy] = "no-referrer" }
        if https { headers[.strictTransportSecurity] = "max-age=63072000; includeSubDomains" }
        if PublicRateLimitMiddleware.isDiscovery(path) { headers[.accessControlAllowOrigin] = "*" }
    }
}

extension HTTPField.Name {
    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!
}

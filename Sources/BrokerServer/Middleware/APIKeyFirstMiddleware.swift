import BrokerApplication
import BrokerCore
import HTTPTypes
import Hummingbird

/// A request to an API route (`/v1/…`, every one of which needs an API key) that carries no
/// `Authorization` header is 401 `missing_api_key` before its body is read or checked: a caller
/// without a key learns nothing of the contract's validation (schemathesis ST203). Only the
/// header's absence is decided here; a key that is present is checked by the operation, with
/// its scope. Paths and methods with no route keep their 404 and 405.
struct APIKeyFirstMiddleware: RouterMiddleware {
    typealias Context = BrokerRequestContext
    let routes: RouteTable
    let authenticator: APIKeyAuthenticator

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        if request.headers[.authorization] == nil, request.uri.path.hasPrefix("/v1/"),
            routes.allowedMethods(for: request.uri.path).contains(request.method)
        {
            // Refused the way an operation refuses it: audited (sampled), and spending the
            // address's budget of refusals.
            _ = try await authenticator.authenticate(
                authorization: nil, requiring: .sessions, context: HTTPCaller(request, context: context).context)
        }
        return try await next(request, context)
    }
}

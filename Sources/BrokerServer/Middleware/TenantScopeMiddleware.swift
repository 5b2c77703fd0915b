import Hummingbird
import Storage

/// Runs each request in a tenant scope of its own (decision 0055), empty until the request
/// names its tenant: its API key's authentication settles it, and so does what a public
/// route's callback carries. Until then its statements see no tenant's rows, except the
/// lookups that find a tenant (a key's hash, a state, a slug), which say so.
struct TenantScopeMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        try await TenantScope.request { try await next(request, context) }
    }
}

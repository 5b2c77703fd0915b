import Hummingbird

/// `/metrics` answers 404 on the API's listener when `BROKER_METRICS_PORT` gives it its own
/// (``buildMetricsApplication(services:host:port:logger:)``).
struct MetricsElsewhereMiddleware: RouterMiddleware {
    typealias Context = BrokerRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        guard request.uri.path == "/metrics" else { return try await next(request, context) }
        throw HTTPError(.notFound)
    }
}

import Dispatch
import HTTPTypes
import Hummingbird
import Metrics
import Synchronization

/// The request metrics Hummingbird's `MetricsMiddleware` records, under the same names and
/// dimensions (`hb_requests`, `http_server_request_duration`, `hb_request_errors`,
/// `http_server_active_requests`), recorded when the handler returns its response instead of
/// after the response is written (decision 0029). Hummingbird's wraps the body in a closure
/// to record after writing; a wrapped body loses the server's single-buffer fast path, so every
/// response went out as two writes (head, then body): two system calls, two TCP segments and
/// two wake-ups of the client for each request. Every response of the broker is one buffer, so
/// the time to write it is not worth that.
struct RequestMetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    private let cache = RequestMetricsCache()

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = DispatchTime.now().uptimeNanoseconds
        let active = cache.activeRequests(method: request.method)
        active.increment()
        defer { active.decrement() }
        do {
            let response = try await next(request, context)
            let metrics = cache.endpoint(.init(route: context.endpointPath ?? "Unknown", method: request.method, status: response.status))
            metrics.requests.increment()
            metrics.duration.recordNanoseconds(Int64(clamping: DispatchTime.now().uptimeNanoseconds &- start))
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status ?? .internalServerError
            let metrics = cache.endpoint(.init(route: context.endpointPath ?? "NotFound", method: request.method, status: status))
            metrics.requests.increment()
            metrics.errors.increment()
            throw error
        }
    }
}

/// The metric objects of each method and of each route, method and status, made once: a
/// metrics factory's own lookup by label and dimensions costs more than this dictionary's.
final class RequestMetricsCache: Sendable {
    struct EndpointKey: Hashable, Sendable {
        let route: String
        let method: HTTPRequest.Method
        let status: HTTPResponse.Status
    }

    struct EndpointMetrics: Sendable {
        let requests: Counter
        let duration: Timer
        let errors: Counter

        init(_ key: EndpointKey) {
            let dimensions = [
                ("http.route", key.route), ("http.request.method", key.method.rawValue),
                ("http.response.status_code", String(key.status.code)),
            ]
            requests = Counter(label: "hb.requests", dimensions: dimensions)
            duration = Timer(label: "http.server.request.duration", dimensions: dimensions, preferredDisplayUnit: .seconds)
            errors = Counter(
                label: "hb.request.errors",
                dimensions: [
                    ("http.route", key.route), ("http.request.method", key.method.rawValue), ("error.type", String(key.status.code)),
                ])
        }
    }

    private let methods = Mutex<[HTTPRequest.Method: Meter]>([:])
    private let endpoints = Mutex<[EndpointKey: EndpointMetrics]>([:])

    func activeRequests(method: HTTPRequest.Method) -> Meter {
        methods.withLock { methods in
            if let meter = methods[method] { return meter }
            let meter = Meter(label: "http.server.active_requests", dimensions: [("http.request.method", method.rawValue)])
            methods[method] = meter
            return meter
        }
    }

    func endpoint(_ key: EndpointKey) -> EndpointMetrics {
        endpoints.withLock { endpoints in
            if let metrics = endpoints[key] { return metrics }
            let metrics = EndpointMetrics(key)
            endpoints[key] = metrics
            return metrics
        }
    }
}

import HTTPTypes
import Hummingbird
import Logging
import Synchronization

/// Caps the request body, then runs the rest of the chain with ``RequestInfo/current`` set
/// and the request id echoed in `X-Request-Id`.
struct RequestInfoMiddleware: RouterMiddleware {
    typealias Context = BrokerRequestContext
    let maxBodyBytes: Int
    /// Routes (POST, exact path) whose bodies are larger by design, with their own cap: the
    /// route reads the body itself (`POST /v1/accounts/import`: 1,000 records).
    var largerBodies: [String: Int] = [:]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        var request = request
        let cap = request.method == .post ? largerBodies[request.uri.path] ?? maxBodyBytes : maxBodyBytes
        if let length = request.headers[.contentLength].flatMap(Int.init), length > cap {
            throw HTTPError(.contentTooLarge)
        }
        _ = try await RequestBodyWatch.reading { try await request.collectBody(upTo: cap) }
        let info = RequestInfo(
            headers: request.headers, requestID: context.id,
            remoteAddress: context.clientAddress, logger: context.logger)
        var response = try await RequestInfo.$current.withValue(info) {
            try await next(request, context)
        }
        response.headers[.requestID] = context.id
        for field in info.extraResponseHeaders.fields.withLock({ $0 }) { response.headers[field.name] = field.value }
        if context.logger.logLevel <= .debug {
            context.logger.debug(
                "request", metadata: ["method": "\(request.method)", "path": "\(request.uri.path)", "status": "\(response.status.code)"])
        }
        return response
    }
}

extension HTTPField.Name {
    static let requestID = HTTPField.Name("X-Request-Id")!
}

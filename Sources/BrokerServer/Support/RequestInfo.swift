import HTTPTypes
import Logging
import Synchronization

/// What handlers generated from openapi.yaml need to know about the HTTP request beyond
/// their typed input: the headers (API-key authentication), the request id and the peer.
/// Set by ``RequestInfoMiddleware`` for the duration of a request.
public struct RequestInfo: Sendable {
    @TaskLocal public static var current: RequestInfo?

    public var headers: HTTPFields
    public var requestID: String
    public var remoteAddress: String?
    public var logger: Logger
    /// Headers the middleware adds to the response verbatim. The OpenAPI runtime
    /// percent-encodes header values it serializes, which mangles e.g. `Cache-Control`.
    let extraResponseHeaders = ResponseHeaders()

    /// Adds a header to the response of the current request.
    public static func setResponseHeader(_ name: HTTPField.Name, _ value: String) {
        current?.extraResponseHeaders.fields.withLock { $0[name] = value }
    }

    final class ResponseHeaders: Sendable {
        let fields = Mutex(HTTPFields())
    }
}

import AsyncHTTPClient
import BrokerCore
import Foundation
import NIOHTTP1
import Tracing

/// A client span for each outbound call (a provider's token endpoint, key set or Graph; a
/// webhook), when traces are exported (``TraceSpans``). AsyncHTTPClient's own spans are off:
/// they record the whole URL, and Graph's query carries the user's token and the app's secret.
/// This span holds the method, host, port and path, never the query or a header.
enum OutboundSpan {
    static func around<T>(
        _ request: HTTPClientRequest, status: (T) -> Int, _ body: () async throws -> T
    ) async throws -> T {
        guard TraceSpans.enabled else { return try await body() }
        let url = URLComponents(string: request.url)
        let method = request.method.rawValue
        return try await withSpan(method, ofKind: .client) { span in
            span.attributes["http.request.method"] = method
            span.attributes["server.address"] = url?.host
            span.attributes["server.port"] = url?.port ?? (url?.scheme == "https" ? 443 : 80)
            span.attributes["url.path"] = url?.path
            let answer = try await body()
            let code = status(answer)
            span.attributes["http.response.status_code"] = code
            if code >= 500 { span.setStatus(SpanStatus(code: .error)) }
            return answer
        }
    }
}

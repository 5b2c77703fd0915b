import AsyncHTTPClient
import NIOCore

extension HTTPClient {
    /// The client of every outbound provider call (key sets, Apple's token endpoint, Graph):
    /// keep-alive connections pooled per host, up to 64 at once (AsyncHTTPClient's default is
    /// 8, which queued classic Facebook sign-ins behind each other), idle ones kept a minute.
    /// It lives as long as the process, like `HTTPClient.shared`. AsyncHTTPClient makes no spans for it: ``OutboundSpan`` does, without the URL's query.
    public static let providers: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 64)
        configuration.timeout.connect = .seconds(5)
        // No spans of AsyncHTTPClient's: they record the whole URL (Graph's query holds tokens),
        // and making one for every call cost the web callback a measurable share of its time.
        configuration.tracing.tracer = nil
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()
}

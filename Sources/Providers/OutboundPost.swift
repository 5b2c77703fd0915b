import AsyncHTTPClient
import BrokerCore
import NIOCore
import NIOHTTP1

/// A POST to a party other than a provider (a tenant's webhook): the answer's status, with the
/// body read to its end and discarded, all within `timeout` (connecting, the head and the body).
/// Throws ``DeadlineExceeded`` when the time is up, and the client's error when the party is
/// unreachable.
public enum OutboundPost {
    public static func send(
        url: String, headers: [(String, String)], body: [UInt8], with client: HTTPClient, timeout: Duration
    ) async throws -> Int {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        request.body = .bytes(ByteBuffer(bytes: body))
        let headDeadline = NIODeadline.now() + ProviderAnswer.timeAmount(timeout)
        let prepared = request
        return try await OutboundSpan.around(prepared, status: { $0 }) {
            try await withDeadline(timeout) {
                let response = try await client.execute(prepared, deadline: headDeadline)
                for try await _ in response.body {}
                return Int(response.status.code)
            }
        }
    }
}

extension HTTPClient {
    /// The client deliveries go out on: it follows no redirect (a redirect could lead a signed
    /// delivery to an address the destination check never saw) and makes no spans of its own
    /// (``OutboundSpan`` makes one without the URL's query).
    public static let webhooks: HTTPClient = HTTPClient(eventLoopGroupProvider: .singleton, configuration: webhookConfiguration)

    static var webhookConfiguration: HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.timeout.connect = .seconds(5)
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 8)
        configuration.tracing.tracer = nil
        return configuration
    }

    /// A client like ``webhooks`` whose connections to `host` go to `address` (the one the
    /// destination check saw), with TLS still naming and verifying `host`: the client does not
    /// look the name up again (AsyncHTTPClient's `dnsOverride`). The caller shuts it down.
    public static func webhook(pinning host: String, to address: String) -> HTTPClient {
        var configuration = webhookConfiguration
        configuration.dnsOverride = [host: address]
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }
}

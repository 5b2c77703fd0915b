import BrokerCore
import HTTPTypes
import Hummingbird

/// Sets the request's ``BrokerRequestContext/clientAddress``: the peer's address unless the
/// peer is a trusted proxy (`BROKER_TRUSTED_PROXIES`), then the address its
/// `X-Forwarded-For` names (decision 0048). Without trusted proxies the header is never read.
struct ClientAddressMiddleware: RouterMiddleware {
    typealias Context = BrokerRequestContext
    let resolver: ClientAddressResolver

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        guard !resolver.trustedProxies.isEmpty else { return try await next(request, context) }
        var context = context
        let forwarded = request.headers[values: .xForwardedFor]
        let peer = context.remoteAddress?.ipAddress.flatMap { IPAddress($0) }
        context.clientAddress = resolver.client(peer: peer, forwardedFor: forwarded)?.description ?? context.clientAddress
        return try await next(request, context)
    }
}

extension HTTPField.Name {
    static let xForwardedFor = HTTPField.Name("X-Forwarded-For")!
}

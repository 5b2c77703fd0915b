import Hummingbird
import Logging
import NIOCore

/// The request context of the broker's router: Hummingbird's core storage plus the peer address.
public struct BrokerRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?
    /// The connection's event loop: the request's work runs there (``EventLoopTaskExecutor``).
    public let eventLoop: any EventLoop
    /// The client's address: the peer's, or the one a trusted proxy forwarded
    /// (``ClientAddressMiddleware``); what rate limits, audit rows and logs name.
    public var clientAddress: String?

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
        self.eventLoop = source.channel.eventLoop
        self.clientAddress = remoteAddress?.ipAddress
    }
}

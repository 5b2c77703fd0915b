import BrokerCore
import NIOCore
import NIOHTTP1
import Synchronization

/// Open connections per client address, shared by every connection of one server (decision
/// 0048). A trusted proxy's connections are not counted: it carries many clients.
final class ConnectionCounts: Sendable {
    let cap: Int
    let resolver: ClientAddressResolver
    private let counts = Mutex<[IPAddress: Int]>([:])

    init(cap: Int, resolver: ClientAddressResolver) {
        self.cap = cap
        self.resolver = resolver
    }

    /// Counts a new connection from `address`; false when the address holds its cap already.
    func open(_ address: IPAddress) -> Bool {
        if resolver.isTrusted(address) { return true }
        return counts.withLock { counts in
            let held = counts[address, default: 0]
            guard held < cap else { return false }
            counts[address] = held + 1
            return true
        }
    }

    func close(_ address: IPAddress) {
        if resolver.isTrusted(address) { return }
        counts.withLock { counts in
            let held = counts[address, default: 0]
            counts[address] = held > 1 ? held - 1 : nil
        }
    }

    func held(by address: IPAddress) -> Int { counts.withLock { $0[address, default: 0] } }
}

/// Told down a connection's pipeline when its address already holds
/// `BROKER_HTTP_MAX_CONNECTIONS_PER_IP` others.
struct ConnectionOverCap: Sendable {}

/// First in every connection's pipeline: a connection whose address already holds
/// `BROKER_HTTP_MAX_CONNECTIONS_PER_IP` others is not counted, and is marked over the cap
/// (``ConnectionOverCap``): ``OverCapAnswerHandler`` answers its request 503 and closes it.
/// Closed unanswered, a client's pool saw a dead connection and no reason (issue 39 F18).
final class ConnectionCapHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    let counts: ConnectionCounts
    private var counted: IPAddress?

    init(counts: ConnectionCounts) { self.counts = counts }

    func channelActive(context: ChannelHandlerContext) {
        guard let address = context.remoteAddress?.ipAddress.flatMap({ IPAddress($0) }) else {
            context.fireChannelActive()
            return
        }
        guard counts.open(address) else {
            RateLimitMetrics.connectionRefused()
            context.fireChannelActive()
            context.fireUserInboundEventTriggered(ConnectionOverCap())
            return
        }
        counted = address
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let counted { counts.close(counted) }
        counted = nil
        context.fireChannelInactive()
    }
}

/// What ``RequestHeadSignalHandler`` tells ``HeaderTimeoutHandler`` (outbound user events
/// travel from the HTTP side of the pipeline to its byte side).
enum RequestHeadEvent: Sendable {
    /// A whole request head was read.
    case headReceived
    /// A response ended: the next bytes start a new head.
    case responseEnded
}

/// Before the HTTP decoder: a connection must deliver a whole request head within
/// `BROKER_HTTP_HEADER_TIMEOUT` once it opened, and once the first byte of any later request
/// arrived; else it is closed (a client sending half a head holds nothing for long). Idle
/// keep-alive connections are left to the idle timeout.
final class HeaderTimeoutHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let timeout: TimeAmount
    private var awaitingHead = true
    private var timer: Scheduled<Void>?

    init(timeout: TimeAmount) { self.timeout = timeout }

    func channelActive(context: ChannelHandlerContext) {
        arm(context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if awaitingHead, timer == nil { arm(context) }
        context.fireChannelRead(data)
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard let event = event as? RequestHeadEvent else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        switch event {
        case .headReceived:
            awaitingHead = false
            timer?.cancel()
            timer = nil
        case .responseEnded:
            awaitingHead = true
        }
        promise?.succeed(())
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    private func arm(_ context: ChannelHandlerContext) {
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: timeout) { bound.value.close(promise: nil) }
    }
}

/// After the HTTP decoder: tells ``HeaderTimeoutHandler`` when a request head is complete and
/// when a response has ended.
final class RequestHeadSignalHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head = unwrapInboundIn(data) { context.triggerUserOutboundEvent(RequestHeadEvent.headReceived, promise: nil) }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let isEnd = if case .end = unwrapOutboundIn(data) { true } else { false }
        context.write(data, promise: promise)
        if isEnd { context.triggerUserOutboundEvent(RequestHeadEvent.responseEnded, promise: nil) }
    }
}

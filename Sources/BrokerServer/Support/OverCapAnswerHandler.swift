import Foundation
import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// After the HTTP decoder: on a connection marked ``ConnectionOverCap``, every request is held
/// back from the server and answered `503 connection_limit` with `Retry-After` and
/// `Connection: close`, and the connection is closed once the client has read it (as
/// ``HTTPParseErrorHandler`` closes). Other connections pass through untouched.
final class OverCapAnswerHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private var overCap = false
    private var answered = false

    static let body = Data(
        """
        {"code":"connection_limit","detail":"This client address holds as many connections as the server accepts from one \
        address (BROKER_HTTP_MAX_CONNECTIONS_PER_IP); retry on one of them or after Retry-After.","status":503,\
        "title":"Too many connections","type":"urn:identitybroker:problem:connection_limit"}
        """.utf8)

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ConnectionOverCap {
            overCap = true
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard overCap else {
            context.fireChannelRead(data)
            return
        }
        guard !answered, case .end = unwrapInboundIn(data) else { return }
        answered = true
        HTTPParseErrorHandler.answerAndClose(context, status: .serviceUnavailable, body: Self.body, retryAfter: "1")
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // What the client sends after the answer is dropped, its parse errors included.
        if overCap {
            context.close(promise: nil)
            return
        }
        context.fireErrorCaught(error)
    }
}

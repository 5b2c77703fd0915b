import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes

/// Answers a request the HTTP/1 decoder refuses (a header block over the limit, a malformed
/// request line or header) with a problem, then closes the connection. Hummingbird's own
/// answer is an empty 400; clients and operators get no reason from it. Sits after the
/// decoder, so it sees the decoder's error before the server's request loop does.
final class HTTPParseErrorHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// A response was begun on this connection and not ended: the problem cannot be written
    /// after it.
    private var responseInProgress = false
    /// The problem was written; what the client still sends is read and dropped until it
    /// closes (or `lingerTime` passes), so that closing never resets the connection before
    /// the client has read the answer.
    private var answered = false
    static let lingerTime: TimeAmount = .seconds(2)

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !answered else { return }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head: responseInProgress = true
        case .end: responseInProgress = false
        case .body: break
        }
        context.write(data, promise: promise)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // After the answer, the decoder reports every further read as an error: drop them.
        guard !answered else { return }
        guard let parseError = error as? HTTPParserError, !responseInProgress else {
            context.fireErrorCaught(error)
            return
        }
        let problem = Self.problem(for: parseError)
        answered = true
        Self.answerAndClose(context, status: problem.status, body: problem.body)
    }

    /// Writes a problem answer with `Connection: close` below the server's request loop, closes
    /// the output, and closes the connection once the client has read it (or `lingerTime`
    /// passed): closing at once could reset the connection before the client read the answer.
    static func answerAndClose(_ context: ChannelHandlerContext, status: HTTPResponse.Status, body: Data, retryAfter: String? = nil) {
        var buffer = context.channel.allocator.buffer(capacity: body.count)
        buffer.writeBytes(body)
        var fields: HTTPFields = [
            .contentType: "application/problem+json", .contentLength: "\(buffer.readableBytes)", .cacheControl: "no-store",
            .connection: "close",
        ]
        if let retryAfter { fields[.retryAfter] = retryAfter }
        context.write(NIOAny(HTTPResponsePart.head(HTTPResponse(status: status, headerFields: fields))), promise: nil)
        context.write(NIOAny(HTTPResponsePart.body(buffer)), promise: nil)
        context.writeAndFlush(NIOAny(HTTPResponsePart.end(nil)), promise: nil)
        context.close(mode: .output, promise: nil)
        let channel = context.channel
        channel.eventLoop.scheduleTask(in: lingerTime) { channel.close(promise: nil) }
    }

    static func problem(for error: HTTPParserError) -> (status: HTTPResponse.Status, body: Data) {
        let (status, code, title, detail): (HTTPResponse.Status, String, String, String) =
            switch error {
            case .headerOverflow:
                (
                    .requestHeaderFieldsTooLarge, "headers_too_large", "Request headers too large",
                    "The request's header block is larger than the server accepts."
                )
            default:
                (.badRequest, "invalid_request", "Invalid request", "The request is not well-formed HTTP/1.1.")
            }
        let text = """
            {"code":"\(code)","detail":"\(detail)","status":\(status.code),"title":"\(title)",\
            "type":"urn:identitybroker:problem:\(code)"}
            """
        return (status, Data(text.utf8))
    }
}

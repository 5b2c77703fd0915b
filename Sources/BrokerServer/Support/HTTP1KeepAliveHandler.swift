import NIOCore
import NIOHTTP1

/// Marks a request whose connection must not stay open (HTTP/1.0 without `Connection:
/// keep-alive`, or `Connection: close`) with `Connection: close`, which is what the server's
/// request loop looks for: it then closes the connection after the answer. Sits between the
/// HTTP/1 decoder and the conversion to HTTP types, the last place the request's version is
/// known. Without it an HTTP/1.0 client's connection stayed open until the idle timeout.
final class HTTP1KeepAliveHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data), !head.isKeepAlive,
            !head.headers[canonicalForm: "connection"].contains(where: { $0.lowercased() == "close" })
        else {
            context.fireChannelRead(data)
            return
        }
        head.headers.replaceOrAdd(name: "connection", value: "close")
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }
}

import NIOCore
import NIOHTTP1

/// Marks a request whose connection must not stay open (HTTP/1.0 without `Connection:
/// keep-alive`, or `Connection: close`) with `Connection: close`, which is what the server's
/// request loop looks for: it then closes the connection after the answer. Sits between the
/// HTTP/1 decoder and the conversion to HTTP types, the last place the request's version is
/// known. Without it an HTTP/1.0 client's connection stayed open until the idle timeout.
/// Seen with Hummingbird 2.28.1 (`HTTPChannelHandler.handleHTTP` closes after an answer only
/// when the request says `Connection: close`). Can go when `Benchmarks/upstream`'s
/// `repro-http10-close` exits 1 against a newer release and
/// `ConnectionHandlingTests.anHTTP10RequestWithoutKeepAliveIsClosedAfterItsAnswer` passes
/// without it (docs/upstream.md, "HTTP/1.0 connections left open").
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

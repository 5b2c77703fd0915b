import HummingbirdCore
import Logging
import NIOCore
import NIOHTTPTypesHTTP1
import Storage

/// A server child channel that handles each connection with its event loop as task executor
/// preference (see ``EventLoopTaskExecutor``); setup and handling are the wrapped channel's,
/// with ``HTTP1KeepAliveHandler`` put before the conversion to HTTP types.
struct EventLoopPinnedChannel<Inner: ServerChildChannel>: ServerChildChannel {
    typealias Value = Inner.Value
    let inner: Inner
    /// Connections per client address (``ConnectionCapHandler``).
    let connections: ConnectionCounts
    /// ``HeaderTimeoutHandler``'s bound.
    let headerTimeout: TimeAmount

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        inner.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let pipeline = channel.pipeline.syncOperations
            let codec = try pipeline.handler(type: HTTP1ToHTTPServerCodec.self)
            try pipeline.addHandler(OverCapAnswerHandler(), position: .after(codec))
            try pipeline.addHandler(HTTP1KeepAliveHandler(), position: .before(codec))
            try pipeline.addHandler(RequestHeadSignalHandler(), position: .before(codec))
            try pipeline.addHandler(HeaderTimeoutHandler(timeout: headerTimeout), position: .first)
            try pipeline.addHandler(ConnectionCapHandler(counts: connections), position: .first)
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await withTaskExecutorPreference(EventLoopTaskExecutor.executor(for: value.channel.eventLoop)) {
            await inner.handle(value: value, logger: logger)
        }
    }
}

import HummingbirdCore
import Logging
import NIOCore
import Storage

/// A server child channel that handles each connection with its event loop as task executor
/// preference (see ``EventLoopTaskExecutor``); setup and handling are the wrapped channel's.
struct EventLoopPinnedChannel<Inner: ServerChildChannel>: ServerChildChannel {
    typealias Value = Inner.Value
    let inner: Inner

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        inner.setup(channel: channel, logger: logger)
    }

    func handle(value: Value, logger: Logger) async {
        await withTaskExecutorPreference(EventLoopTaskExecutor.executor(for: value.channel.eventLoop)) {
            await inner.handle(value: value, logger: logger)
        }
    }
}

import HummingbirdCore
import Logging
import NIOCore
import Synchronization

/// A Swift concurrency task executor that runs jobs on one NIO event loop.
///
/// A connection's work is pinned to its channel's event loop (``EventLoopPinnedChannel``):
/// reading the request, the handlers, and every resumption after a database round trip run on
/// the thread that owns the socket, instead of hopping to the cooperative pool and back (each
/// hop a thread wake-up; measured: a tenth of the broker's time in the scheduler).
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    private init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        eventLoop.execute { job.runSynchronously(on: executor) }
    }

    /// One executor per event loop, kept for the life of the process (a few loops).
    private static let executors = Mutex<[ObjectIdentifier: EventLoopTaskExecutor]>([:])

    static func executor(for eventLoop: any EventLoop) -> EventLoopTaskExecutor {
        executors.withLock { executors in
            if let known = executors[ObjectIdentifier(eventLoop)] { return known }
            let made = EventLoopTaskExecutor(eventLoop: eventLoop)
            executors[ObjectIdentifier(eventLoop)] = made
            return made
        }
    }
}

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

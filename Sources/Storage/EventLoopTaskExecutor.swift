import NIOCore
import Synchronization

/// A Swift concurrency task executor that runs jobs on one NIO event loop.
///
/// A connection's work is pinned to its channel's event loop (``EventLoopPinnedChannel``):
/// reading the request, the handlers, and every resumption after a database round trip run on
/// the thread that owns the socket, instead of hopping to the cooperative pool and back (each
/// hop a thread wake-up; measured: a tenth of the broker's time in the scheduler).
public final class EventLoopTaskExecutor: TaskExecutor {
    public let eventLoop: any EventLoop

    private init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        eventLoop.execute { job.runSynchronously(on: executor) }
    }

    /// One executor per event loop, kept for the life of the process (a few loops).
    private static let executors = Mutex<[ObjectIdentifier: EventLoopTaskExecutor]>([:])

    public static func executor(for eventLoop: any EventLoop) -> EventLoopTaskExecutor {
        executors.withLock { executors in
            if let known = executors[ObjectIdentifier(eventLoop)] { return known }
            let made = EventLoopTaskExecutor(eventLoop: eventLoop)
            executors[ObjectIdentifier(eventLoop)] = made
            return made
        }
    }
}


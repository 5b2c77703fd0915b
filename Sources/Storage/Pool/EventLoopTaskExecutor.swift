import NIOCore
import Synchronization

/// A Swift concurrency task executor that runs jobs on one NIO event loop.
///
/// Two uses, both to keep the work on the threads that own the sockets instead of hopping to the
/// cooperative pool and back (each hop a thread wake-up): the server pins each connection's
/// work to its channel's event loop (BrokerServer's `EventLoopPinnedChannel`, decision 0021),
/// and ``Database/run()`` runs the connection pool's own task on one (decision 0022).
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

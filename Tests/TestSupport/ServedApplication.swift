import Logging
import ServiceLifecycle

/// A server (a Hummingbird application, or any `Service` that tells its port) run in a
/// `ServiceGroup` for the duration of a body, and ended by graceful shutdown, never by
/// cancelling the task that runs it.
///
/// Why not cancellation: with swift-nio 2.101.3 (the version in `.build/checkouts/swift-nio`),
/// cancelling the task that serves a listening `NIOAsyncChannel` while a connection is being
/// accepted can crash the whole test process with `NIOAsyncWriter.swift:177: Fatal error:
/// Deinited NIOAsyncWriter without calling finish()` (apple/swift-nio issues #2813 and #3481).
/// Cancellation stops the accept loop's `for try await` and drops the connections already
/// accepted but not yet read from the server channel's stream; nothing calls
/// `executeThenClose` on them, so their outbound writers are released unfinished and trap. A
/// fresh-clone CI run lost every test to it while a test server was torn down.
///
/// Graceful shutdown (`ServiceGroup.triggerGracefulShutdown()`, as the swift-nio maintainers
/// advise in #3481) closes the listening channel first and lets the accept loop read its
/// stream to the end, so every accepted connection is handed to `executeThenClose` and
/// finished; in-flight requests are answered and their connections closed; then the server's
/// task returns by itself. Hummingbird's own `HummingbirdTesting` ends its live server the same
/// way. See docs/decisions/0071-test-servers-end-by-graceful-shutdown.md.
///
/// The server runs in a task of its own, not a child of the caller's: a test cancelled (its
/// time limit, a failing sibling) must not cancel the server either, only end it gracefully.
public enum ServedApplication {
    /// The server ended before it listened (e.g. it could not bind), without saying why.
    public struct EndedBeforeListening: Error, CustomStringConvertible {
        public var description: String { "the test server ended before it listened" }
    }

    /// Runs the service `makeService` builds for the duration of `body`, which gets the port
    /// once the server listens. `makeService` gets the function the server calls with its port
    /// once it listens (Hummingbird's `onServerRunning`).
    ///
    /// However `body` ends (returns, throws, or its task is cancelled), the server is ended by
    /// graceful shutdown and its end awaited before this returns. An error of the server's own
    /// is thrown when `body` succeeded; `body`'s error comes first otherwise.
    ///
    /// `gracefulShutdownLimit` bounds the graceful shutdown: a request a mock still holds (a
    /// fault left hanging) does not hold the test up for good. Past it the group cancels what is
    /// left; the listening channel is closed and the accept loop has ended by then, so no
    /// accepted connection is dropped. nil: no bound (a test of the server's own end).
    public static func with<S: Service, T>(
        gracefulShutdownLimit: Duration? = .seconds(15),
        _ makeService: (_ listening: @escaping @Sendable (_ port: Int) -> Void) -> S,
        _ body: (_ port: Int) async throws -> T
    ) async throws -> T {
        let (ports, portSink) = AsyncStream.makeStream(of: Int.self)
        let service = makeService { port in portSink.yield(port) }
        var logger = Logger(label: "TestSupport.ServedApplication")
        logger.logLevel = .warning
        // No signals: the test process's SIGINT/SIGTERM are not the server's to take.
        var configuration = ServiceGroupConfiguration(services: [service], logger: logger)
        configuration.maximumGracefulShutdownDuration = gracefulShutdownLimit
        let group = ServiceGroup(configuration: configuration)
        let running = Task {
            // A server that ends (or fails to listen) ends the wait for its port.
            defer { portSink.finish() }
            try await group.run()
        }
        let outcome: Result<T, any Error>
        do {
            var iterator = ports.makeAsyncIterator()
            // nil: the server ended before it listened, or this task was cancelled.
            guard let port = await iterator.next() else {
                if Task.isCancelled { throw CancellationError() }
                throw EndedBeforeListening()
            }
            outcome = .success(try await body(port))
        } catch {
            outcome = .failure(error)
        }
        // Remembered by the group even if it has not started the service yet.
        await group.triggerGracefulShutdown()
        let ended = await running.result
        switch (outcome, ended) {
        case (.failure(let error), _):
            if error is EndedBeforeListening, case .failure(let serverError) = ended { throw serverError }
            throw error
        case (.success, .failure(let serverError)):
            throw serverError
        case (.success(let value), .success):
            return value
        }
    }
}

import Synchronization

/// Thrown by ``withDeadline(_:executorPreference:_:)`` when the operation did not finish in time.
public struct DeadlineExceeded: Error, Sendable, Equatable {
    public let timeout: Duration

    public init(timeout: Duration) { self.timeout = timeout }
}

/// Runs `operation` and returns its result, or throws ``DeadlineExceeded`` once `timeout` has
/// passed, whichever comes first. The caller is answered by its deadline even when the
/// operation does not end when cancelled (a query written on a connection that died without
/// telling the client, a provider's body trickling in on a loaded machine): the operation runs
/// in a task of its own, cancelled when the deadline wins, and finishes in the background.
/// Deadlines are kept by one ``DeadlineWheel`` (one task for the process, not one per call).
/// `executorPreference`: where that task runs (an unstructured task does not inherit the
/// caller's preference). Bounds a database call (Storage's `withDatabaseDeadline`), a whole
/// request, and an outbound call to a provider as a whole (connect, head and body), which
/// AsyncHTTPClient's own deadline does not: it covers the head only.
public func withDeadline<T: Sendable>(
    _ timeout: Duration, executorPreference: (any TaskExecutor)? = nil, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    let gate = ResumeOnce<T>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            let work = Task(executorPreference: executorPreference) {
                // A deadline that passed (or a caller cancelled) before the operation's task
                // started, on a loaded machine, decided the outcome: the operation never runs, so
                // nothing it would do (a write, a read of the request's body) happens after its
                // caller was answered.
                guard gate.isUndecided else { return }
                do { gate.resume(.success(try await operation())) } catch { gate.resume(.failure(error)) }
            }
            let entry = DeadlineWheel.shared.add(after: timeout) {
                // The operation is cancelled before its caller resumes, never after: what the
                // caller does next may touch what the operation was using. Hummingbird 2.28's
                // connection loop reads the rest of a request's body from the same inbound
                // iterator the operation was reading it from; two reads at once on a
                // NIOThrowingAsyncSequenceProducer (swift-nio 2.x) stop the process
                // ("only allow a single Iterator"). Cancelled first, the operation's read has
                // ended the sequence (its cancellation handler runs inside `cancel()`), so the
                // loop's read ends too (decision 0076). Seen with Hummingbird 2.28.1
                // (`HTTPChannelHandler.handleHTTP` drains the body after the responder returns)
                // on swift-nio 2.101.3. Only this reason for the order could go (the order is
                // sound anyway): when `Benchmarks/upstream`'s `repro-body-iterator` exits 1
                // against a newer Hummingbird (its server survives a handler's task still
                // reading the body); `OperationDeadlineTests` and
                // `ConnectionHandlingTests.manyBodiesStillBeingReadAtTheirDeadlineLeaveTheServerServing`
                // guard the order here (docs/upstream.md, "Two readers of one request body").
                gate.resume(.failure(DeadlineExceeded(timeout: timeout)), beforeResuming: { work.cancel() })
            }
            gate.install(continuation, onResume: { DeadlineWheel.shared.remove(entry) })
        }
    } onCancel: {
        gate.resume(.failure(CancellationError()))
    }
}

/// The process's pending deadlines, checked every 50 ms by one task that runs while any are
/// pending. A deadline fires within 50 ms after it passes.
final class DeadlineWheel: Sendable {
    static let shared = DeadlineWheel()

    private struct State {
        var entries: [UInt64: (deadline: ContinuousClock.Instant, fire: @Sendable () -> Void)] = [:]
        var nextID: UInt64 = 0
        var ticking = false
    }

    private let state = Mutex(State())

    func add(after timeout: Duration, fire: @escaping @Sendable () -> Void) -> UInt64 {
        let (id, start) = state.withLock { state -> (UInt64, Bool) in
            state.nextID &+= 1
            state.entries[state.nextID] = (ContinuousClock.now.advanced(by: timeout), fire)
            let start = !state.ticking
            state.ticking = true
            return (state.nextID, start)
        }
        if start { Task.detached { await self.tick() } }
        return id
    }

    func remove(_ id: UInt64) {
        _ = state.withLock { $0.entries.removeValue(forKey: id) }
    }

    private func tick() async {
        while true {
            try? await Task.sleep(for: .milliseconds(50))
            let now = ContinuousClock.now
            let (due, idle) = state.withLock { state -> ([@Sendable () -> Void], Bool) in
                let expired = state.entries.filter { $0.value.deadline <= now }
                for id in expired.keys { state.entries.removeValue(forKey: id) }
                if state.entries.isEmpty { state.ticking = false }
                return (expired.values.map(\.fire), state.entries.isEmpty)
            }
            for fire in due { fire() }
            if idle { return }
        }
    }
}

/// Resumes a continuation exactly once, from whichever side gets there first; a result that
/// arrives before the continuation is installed waits for it.
final class ResumeOnce<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        var onResume: (@Sendable () -> Void)?
        var result: Result<T, any Error>?
        /// The winner's `beforeResuming` is running: the continuation waits for it.
        var preparing = false
        var resumed = false
    }

    private let state = Mutex(State())

    func install(_ continuation: CheckedContinuation<T, any Error>, onResume: @escaping @Sendable () -> Void) {
        let ready: Result<T, any Error>? = state.withLock { state in
            if let result = state.result, !state.preparing, !state.resumed {
                state.resumed = true
                return result
            }
            state.continuation = continuation
            state.onResume = onResume
            return nil
        }
        if let ready {
            onResume()
            continuation.resume(with: ready)
        }
    }

    /// Whether no side has decided the outcome yet (set under the lock before a winner's
    /// `beforeResuming` runs).
    var isUndecided: Bool { state.withLock { $0.result == nil } }

    /// True when this call decided the outcome. `beforeResuming` runs only then, and finishes
    /// before the caller is resumed.
    @discardableResult
    func resume(_ result: Result<T, any Error>, beforeResuming: (@Sendable () -> Void)? = nil) -> Bool {
        let won: Bool = state.withLock { state in
            guard state.result == nil else { return false }
            state.result = result
            state.preparing = true
            return true
        }
        guard won else { return false }
        beforeResuming?()
        let ready: (CheckedContinuation<T, any Error>, (@Sendable () -> Void)?)? = state.withLock { state in
            state.preparing = false
            guard let continuation = state.continuation, !state.resumed else { return nil }
            state.resumed = true
            state.continuation = nil
            return (continuation, state.onResume)
        }
        if let (continuation, callback) = ready {
            callback?()
            continuation.resume(with: result)
        }
        return true
    }
}

/// The deadline of the request the current task works for (`BROKER_REQUEST_TIMEOUT`), so that
/// an outbound call the request waits on ends, as its provider's outage, before the request
/// runs out (issue 39 F14: with a provider timeout equal to the request's, a code sign-in while
/// Apple hung was answered `request_timeout`, not `apple_unavailable`). Set by the HTTP edge;
/// nil outside a request (workers, the CLI), where only the call's own timeout applies.
public enum RequestBudget {
    @TaskLocal public static var deadline: ContinuousClock.Instant?

    /// What a request keeps after its last outbound call, to answer the outage (a statement,
    /// the problem) before its own deadline.
    public static let reserve: Duration = .milliseconds(750)

    /// `timeout`, shortened to what the current request has left less ``reserve`` (never
    /// below zero: a call with nothing left fails at once, as a timeout).
    public static func bound(_ timeout: Duration, now: ContinuousClock.Instant = .now) -> Duration {
        guard let deadline else { return timeout }
        let left = now.duration(to: deadline) - reserve
        return max(.zero, min(timeout, left))
    }
}

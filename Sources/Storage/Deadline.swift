import Synchronization

/// Runs `operation` and returns its result, or throws ``DatabaseDeadlineExceeded`` once
/// `timeout` has passed, whichever comes first. The caller is answered by its deadline even when
/// the operation never completes (a query written on a connection that died without telling
/// the client): the operation runs in a task of its own, cancelled when the deadline wins.
public func withDatabaseDeadline<T: Sendable>(
    _ timeout: Duration, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    let gate = ResumeOnce<T>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            let work = Task {
                do { gate.resume(.success(try await operation())) } catch { gate.resume(.failure(error)) }
            }
            let timer = Task {
                try? await Task.sleep(for: timeout)
                if gate.resume(.failure(DatabaseDeadlineExceeded())) { work.cancel() }
            }
            gate.install(continuation, onResume: { timer.cancel() })
        }
    } onCancel: {
        gate.resume(.failure(CancellationError()))
    }
}

/// Resumes a continuation exactly once, from whichever side gets there first; a result that
/// arrives before the continuation is installed waits for it.
final class ResumeOnce<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        var onResume: (@Sendable () -> Void)?
        var result: Result<T, any Error>?
        var resumed = false
    }

    private let state = Mutex(State())

    func install(_ continuation: CheckedContinuation<T, any Error>, onResume: @escaping @Sendable () -> Void) {
        let pending: (Result<T, any Error>, @Sendable () -> Void)? = state.withLock { state in
            if let result = state.result, !state.resumed {
                state.resumed = true
                return (result, onResume)
            }
            state.continuation = continuation
            state.onResume = onResume
            return nil
        }
        if let (result, callback) = pending {
            callback()
            continuation.resume(with: result)
        }
    }

    /// True when this call resumed the caller.
    @discardableResult
    func resume(_ result: Result<T, any Error>) -> Bool {
        let (won, ready): (Bool, (CheckedContinuation<T, any Error>, (@Sendable () -> Void)?)?) = state.withLock { state in
            guard !state.resumed, state.result == nil else { return (false, nil) }
            guard let continuation = state.continuation else {
                state.result = result
                return (true, nil)
            }
            state.resumed = true
            state.continuation = nil
            return (true, (continuation, state.onResume))
        }
        if let (continuation, callback) = ready {
            callback?()
            continuation.resume(with: result)
        }
        return won
    }
}

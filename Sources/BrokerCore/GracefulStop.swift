import Synchronization

/// A request to stop taking new work (issue 39 D11: a `SIGTERM` while a revocation call to
/// Apple was in flight cancelled the call, its outcome was never written and its row stayed
/// leased for 15 minutes). The workers and an import look at it before each new item: what is
/// in flight finishes and is recorded; only what is still in flight when the stop's bound runs
/// out is cancelled, and gives its lease back.
public final class GracefulStop: Sendable {
    private struct State {
        var requested = false
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())

    public init() {}

    /// True once a stop was requested.
    public var isRequested: Bool { state.withLock { $0.requested } }

    /// Requests the stop (idempotent).
    public func request() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.requested = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once a stop is requested, or the task is cancelled.
    public func wait() async {
        let id = state.withLock { state -> UInt64 in
            state.nextID &+= 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.requested || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }

    /// Sleeps for `duration`; false when it ended early because a stop was requested or the
    /// task was cancelled.
    public func sleep(for duration: Duration) async -> Bool {
        guard !isRequested else { return false }
        let slept = await withTaskGroup(of: Bool.self) { group in
            group.addTask { (try? await Task.sleep(for: duration)) != nil }
            group.addTask {
                await self.wait()
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        return slept && !isRequested && !Task.isCancelled
    }

    /// Runs `body` until it returns, or until a stop is requested: then it is cancelled (for
    /// work that holds nothing: sweeps, key refreshes, listeners).
    public func cancelling(_ body: @escaping @Sendable () async -> Void) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await body() }
            group.addTask { await self.wait() }
            await group.next()
            group.cancelAll()
        }
    }
}

import Synchronization

/// A value set once and awaited by any number of tasks: how two batches of an import on two
/// connections hand each other their turn (``ImportSession``). The first `fulfil` wins; later
/// ones change nothing. Whoever creates one makes sure it is fulfilled on every path, since a
/// waiter waits until it is. Also what a test awaits to know the cache-invalidation listener
/// is listening (``BrokerServices``).
package final class OneShot<Value: Sendable>: Sendable {
    private struct State {
        var result: Result<Value, any Error>?
        var waiters: [CheckedContinuation<Value, any Error>] = []
    }

    private let state = Mutex(State())

    package init() {}

    /// Sets the result unless one was set; wakes every waiter.
    package func fulfil(_ result: Result<Value, any Error>) {
        let waiters = state.withLock { state -> [CheckedContinuation<Value, any Error>] in
            guard state.result == nil else { return [] }
            state.result = result
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(with: result) }
    }

    /// The result, once it is set.
    package var value: Value {
        get async throws {
            try await withCheckedThrowingContinuation { continuation in
                let result = state.withLock { state -> Result<Value, any Error>? in
                    if state.result == nil { state.waiters.append(continuation) }
                    return state.result
                }
                if let result { continuation.resume(with: result) }
            }
        }
    }
}

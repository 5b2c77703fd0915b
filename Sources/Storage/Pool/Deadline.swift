import BrokerCore

/// Runs `operation` and returns its result, or throws ``DatabaseDeadlineExceeded`` once
/// `timeout` has passed, whichever comes first (``withDeadline(_:executorPreference:_:)``): the
/// caller is answered by its deadline even when a statement never completes (a query written
/// on a connection that died without telling the client).
public func withDatabaseDeadline<T: Sendable>(
    _ timeout: Duration, executorPreference: (any TaskExecutor)? = nil, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    do {
        return try await withDeadline(timeout, executorPreference: executorPreference, operation)
    } catch is DeadlineExceeded {
        throw DatabaseDeadlineExceeded()
    }
}

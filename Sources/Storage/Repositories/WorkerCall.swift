/// A database call of a queue worker (the webhook deliveries, the Apple revocations and
/// credential checks), bounded like a request's (decision 0090). A call that meets the
/// database mid-failover can wait for an answer that never comes, on a connection that died
/// without the client hearing of it: three webhook outcomes done while the standby refused
/// writes were never written, and their worker's round never ended (issue 43). Past
/// ``timeout`` the call is cancelled and throws `DatabaseDeadlineExceeded`, which counts as the
/// database being unavailable: an outcome's write is tried again (``OutcomeWrite``), a take
/// is interrupted and its lease given back once the database answers.
enum WorkerCall {
    /// Twice the default statement timeout, which ends every legitimate call on the server first.
    static let timeout: Duration = .seconds(10)

    static func bounded<T: Sendable>(_ call: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withDatabaseDeadline(timeout, call)
    }
}

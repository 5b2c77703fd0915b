import Synchronization

/// Whether the request the current task works for is waiting on its client for the rest of its
/// body (issue 39 F19). Set by the HTTP edge around the one place a body is read
/// (`RequestInfoMiddleware`), read when the request's deadline passes: a request whose client
/// stopped sending its body is the client's failure (408, counted at the default level), not
/// the broker's (503 `request_timeout`, a warning).
final class RequestBodyWatch: Sendable {
    @TaskLocal static var current: RequestBodyWatch?

    private let reading = Atomic<Bool>(false)

    /// True while the request waits for its body, and after a read that ended without the
    /// whole body: the deadline cancels the handler (and its read) before it answers
    /// (``withDeadline(_:executorPreference:_:)``), and the answer is still that the client
    /// did not send its body.
    var isReading: Bool { reading.load(ordering: .acquiring) }

    /// Runs `read` (the body's read) marked as waiting on the client, for the current request.
    static func reading<T>(_ read: () async throws -> T) async rethrows -> T {
        guard let watch = current else { return try await read() }
        watch.reading.store(true, ordering: .releasing)
        let body = try await read()
        watch.reading.store(false, ordering: .releasing)
        return body
    }
}

import Hummingbird

/// A Hummingbird `router` served on 127.0.0.1 at a free port for the duration of `body`, which
/// gets the port once the server listens (the receivers tests stand up: webhooks, traces).
public enum LoopbackServer {
    public static func with<T: Sendable>(
        _ router: Router<BasicRequestContext>, _ body: (Int) async throws -> T
    ) async throws -> T {
        let (ports, portSink) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in portSink.yield(channel.localAddress?.port ?? 0) })
        return try await withThrowingTaskGroup(of: Void.self, returning: T.self) { group in
            group.addTask { try await app.run() }
            defer { group.cancelAll() }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else { throw CancellationError() }
            return try await body(port)
        }
    }
}

import Hummingbird

/// A Hummingbird `router` served on 127.0.0.1 at a free port for the duration of `body`, which
/// gets the port once the server listens (the receivers tests stand up: webhooks, traces); ended
/// by graceful shutdown (``ServedApplication``).
public enum LoopbackServer {
    public static func with<T: Sendable>(
        _ router: Router<BasicRequestContext>, _ body: (Int) async throws -> T
    ) async throws -> T {
        try await ServedApplication.with(
            { listening in
                Application(
                    router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                    onServerRunning: { channel in listening(channel.localAddress?.port ?? 0) })
            }, body)
    }
}

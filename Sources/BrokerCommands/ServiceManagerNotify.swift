import Foundation
import Logging
import NIOCore
import NIOPosix

/// Tells a service manager that `broker serve` is ready, in systemd's notification protocol
/// (`sd_notify`, `Type=notify`): when `NOTIFY_SOCKET` names a unix datagram socket by its path,
/// one datagram `READY=1` (with a `STATUS=` line) once the HTTP listener is up and the database
/// has been asked whether it answers (what `/readyz` asks). Without the variable nothing is
/// sent. An abstract socket (a name starting with `@`) is not supported and is logged.
enum ServiceManagerNotify {
    /// The socket to notify, taken out of the environment as `sd_notify` does when asked to:
    /// the processes `serve` starts (the embedded PostgreSQL, which speaks the same protocol)
    /// must not tell the service manager that the broker is ready.
    static func takeSocket() -> String? {
        guard let path = ProcessInfo.processInfo.environment["NOTIFY_SOCKET"], !path.isEmpty else { return nil }
        unsetenv("NOTIFY_SOCKET")
        return path
    }

    static func ready(socket path: String?, databaseAnswers: Bool, logger: Logger) async {
        guard let path else { return }
        guard path.hasPrefix("/") else {
            logger.warning(
                "NOTIFY_SOCKET is not a socket path; readiness not notified",
                metadata: ["hint": "give a path such as /run/systemd/notify (abstract sockets are not supported)"])
            return
        }
        let status = databaseAnswers ? "serving" : "serving; the database did not answer (GET /readyz says when it does)"
        do {
            let address = try SocketAddress(unixDomainSocketPath: path)
            let channel = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton).connect(to: address).get()
            let message = channel.allocator.buffer(string: "READY=1\nSTATUS=\(status)\n")
            try await channel.writeAndFlush(AddressedEnvelope(remoteAddress: address, data: message)).get()
            try await channel.close().get()
        } catch {
            logger.warning("could not notify the service manager of readiness", metadata: ["error": "\(error)"])
        }
    }
}

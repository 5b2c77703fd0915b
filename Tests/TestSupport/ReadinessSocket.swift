import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Storage
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The socket a spawned `broker serve` tells of its readiness (`NOTIFY_SOCKET`, systemd's
/// notification protocol): the test awaits its `READY=1` datagram, an event, instead of polling
/// `/readyz`. The datagram comes from an unnamed socket, which NIO's datagram channel cannot
/// name as a sender, so a thread of its own receives it, blocked in `recv` (bounded by
/// `SO_RCVTIMEO`).
public final class ReadinessSocket: Sendable {
    public let path: String
    private let descriptor: Int32

    private init(path: String, descriptor: Int32) {
        self.path = path
        self.descriptor = descriptor
    }

    public static func open() throws -> ReadinessSocket {
        let path = "/tmp/ib-ready-\(UUID().uuidString.prefix(8)).sock"
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        try #require(descriptor >= 0, "socket: \(String(cString: strerror(errno)))")
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { bytes in
            for (index, byte) in path.utf8.prefix(bytes.count - 1).enumerated() { bytes[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(bound == 0, "bind \(path): \(String(cString: strerror(errno)))")
        var timeout = timeval(tv_sec: 60, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return ReadinessSocket(path: path, descriptor: descriptor)
    }

    /// `cli`, with this socket as its `NOTIFY_SOCKET`.
    public func notifying(_ cli: BrokerCLI) -> BrokerCLI {
        var cli = cli
        cli.environment["NOTIFY_SOCKET"] = path
        return cli
    }

    /// Returns once `server` has said it is ready and `/readyz` at `base` answers 200; fails the
    /// test with the server's output when it has not said so within a minute. Closes the socket.
    public func awaitReady(_ server: ProcessRunner.Running, base: String) async throws {
        defer { close() }
        let descriptor = descriptor
        let said: String? = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                var buffer = [UInt8](repeating: 0, count: 1_024)
                let count = recv(descriptor, &buffer, buffer.count, 0)
                continuation.resume(returning: count > 0 ? String(decoding: buffer[..<count], as: UTF8.self) : nil)
            }
        }
        try #require(said?.hasPrefix("READY=1") == true, "broker serve did not say it is ready: \(server.output.suffix(2_000))")
        let readiness = try? await HTTPClient.shared.execute(HTTPClientRequest(url: "\(base)/readyz"), timeout: .seconds(5))
        try #require(
            readiness?.status == .ok, "ready (\(said ?? "")), but /readyz answered \(readiness.map { "\($0.status)" } ?? "nothing")")
    }

    private func close() {
        Glibc.close(descriptor)
        unlink(path)
    }
}

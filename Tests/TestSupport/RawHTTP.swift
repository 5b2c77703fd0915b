import Foundation
import Synchronization
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Sends raw bytes to 127.0.0.1:`port` and returns everything the server answers until it
/// closes (or `timeoutSeconds`): for requests an HTTP client library refuses to send, such as
/// an oversized header block, and to see exactly what goes over the wire.
///
/// Every blocking read here runs on a thread of its own, never on the cooperative pool: that
/// pool has as many threads as cores (two here), and the server under test answers on it. Two
/// tests blocked in `recv` at once starved the server they were waiting for, until their
/// timeouts passed (CI on 67f60cf: two connection tests read nothing for 30 s, 190 s in all).
public enum RawHTTP {
    public static func exchange(port: Int, _ request: [UInt8], timeoutSeconds: Int = 5) async throws -> [UInt8] {
        try await converse(port: port, request, timeoutSeconds: timeoutSeconds).answer
    }

    /// ``exchange(port:_:timeoutSeconds:)``, and whether the server closed the connection
    /// (false: it was still open when `timeoutSeconds` passed with nothing more to read).
    public static func converse(port: Int, _ request: [UInt8], timeoutSeconds: Int = 5) async throws
        -> (answer: [UInt8], closedByServer: Bool)
    {
        try await onOwnThread { try blockingConverse(port: port, request, timeoutSeconds: timeoutSeconds) }
    }

    private static func blockingConverse(port: Int, _ request: [UInt8], timeoutSeconds: Int) throws
        -> (answer: [UInt8], closedByServer: Bool)
    {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(step: "socket") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        try connectLoopback(fd, port: port)
        var sent = 0
        while sent < request.count {
            let count = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { break }  // the server may stop reading once it has answered
            sent += count
        }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return (answer, count == 0) }
            answer.append(contentsOf: buffer[..<count])
        }
    }

    /// Sends `request` and resets the connection without reading: a client that goes away
    /// mid-request.
    public static func sendAndReset(port: Int, _ request: [UInt8]) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(step: "socket") }
        defer { close(fd) }
        try connectLoopback(fd, port: port)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
    }

    fileprivate static func connectLoopback(_ fd: Int32, port: Int) throws {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw Failure(step: "connect") }
    }

    public struct Failure: Error {
        public let step: String
    }
}

/// A TCP port on 127.0.0.1 held until `close()`: listening, a port some other process uses
/// (connections wait in its backlog, unanswered); not listening, a port that refuses
/// connections and that no one else can take meanwhile.
///
/// Its socket is closed once, by `close()` or at `deinit`, whichever comes first. Closed twice,
/// the second `close` shut whatever socket had been given the same number meanwhile: a test
/// that called `close()` in a `defer` closed, at `deinit`, a socket SwiftNIO had just opened in a
/// test running beside it, and SwiftNIO's debug build stopped the whole test process on its
/// selector's assertion that a new socket's number is not registered already (CI on 358fa58,
/// `NIOPosix/SelectorGeneric.swift:320`, in the provider timeout tests' phase).
public final class HeldPort: @unchecked Sendable {
    public let port: Int
    /// The socket's number (for the test that it is closed once).
    public let fd: Int32
    private let closed = Mutex(false)

    public init(listening: Bool = true) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw RawHTTP.Failure(step: "socket") }
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                bind(fd, raw, length) == 0 && (!listening || listen(fd, 1) == 0) && getsockname(fd, raw, &length) == 0
            }
        }
        guard bound else { throw RawHTTP.Failure(step: "bind") }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    public func close() {
        let first = closed.withLock { closed in
            let first = !closed
            closed = true
            return first
        }
        guard first else { return }
        _ = Glibc.close(fd)
    }

    deinit { close() }
}

/// A TCP connection to 127.0.0.1:`port` from a chosen loopback source address (127.0.0.2 is
/// another client than 127.0.0.1 to the server), held open until `close()`: half-sent requests,
/// floods of connections from one address.
public final class RawConnection: @unchecked Sendable {
    private let fd: Int32
    private var closed = false

    public init(port: Int, from source: String = "127.0.0.1") throws {
        // Not inherited by processes other tests start meanwhile (a flood holds thousands).
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw RawHTTP.Failure(step: "socket") }
        self.fd = fd
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else {
            Glibc.close(fd)
            throw RawHTTP.Failure(step: "bind \(source)")
        }
        do {
            try RawHTTP.connectLoopback(fd, port: port)
        } catch {
            Glibc.close(fd)
            throw error
        }
    }

    public func send(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Reads until the server closes the connection (`closed`) or `timeoutSeconds` pass without
    /// a byte; returns what it read. On a thread of its own (see ``RawHTTP``).
    public func readUntilClosed(timeoutSeconds: Int) async -> (answer: String, closed: Bool) {
        await onOwnThread { self.blockingReadUntilClosed(timeoutSeconds: timeoutSeconds) }
    }

    private func blockingReadUntilClosed(timeoutSeconds: Int) -> (answer: String, closed: Bool) {
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: 4_096)
        var answer: [UInt8] = []
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                answer.append(contentsOf: buffer[..<count])
                continue
            }
            return (String(decoding: answer, as: UTF8.self), count == 0 || errno == ECONNRESET)
        }
    }

    /// Reads until what was read contains `marker`, the server closes the connection, or
    /// `timeoutSeconds` pass without a byte; returns what it read. On a thread of its own (see ``RawHTTP``).
    public func read(until marker: String, timeoutSeconds: Int) async -> String {
        await onOwnThread { self.blockingRead(until: marker, timeoutSeconds: timeoutSeconds) }
    }

    private func blockingRead(until marker: String, timeoutSeconds: Int) -> String {
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: 4_096)
        var answer: [UInt8] = []
        while !String(decoding: answer, as: UTF8.self).contains(marker) {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { break }
            answer.append(contentsOf: buffer[..<count])
        }
        return String(decoding: answer, as: UTF8.self)
    }

    public func close() {
        guard !closed else { return }
        closed = true
        _ = Glibc.close(fd)
    }

    deinit { close() }
}

// Hummingbird 2's HTTP/1 server keeps the connection of an HTTP/1.0 request without
// `Connection: keep-alive` open after answering it: the connection loop
// (`HTTPChannelHandler.handleHTTP`) closes after a response only when the request carries
// `Connection: close`, and HTTP/1.0's default (close) is not applied. The client (HTTP/1.0
// reads the body until the server closes) waits until the server's idle timeout, if one is set.
//
// swift run repro-http10-close
// Exit 0: still present (the connection was still open 3 s after the answer).
// Exit 1: fixed upstream (the server closed it after answering). 2: inconclusive.
import Foundation
import Hummingbird

func startServer() async -> UInt16 {
    let (ports, announce) = AsyncStream.makeStream(of: UInt16.self)
    let router = Router()
    router.get("/") { _, _ in "ok\n" }
    let app = Application(
        router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { announce.yield(UInt16($0.localAddress?.port ?? 0)) })
    Task.detached { try await app.run() }
    var iterator = ports.makeAsyncIterator()
    return await iterator.next() ?? 0
}

/// Sends `request` on a new connection; what the server sent, and whether it closed the
/// connection (false: still open when `seconds` passed with nothing more to read).
func exchange(port: UInt16, _ request: String, seconds: Int) -> (answer: String, closed: Bool) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    _ = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    let bytes = Array(request.utf8)
    _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    var timeout = timeval(tv_sec: seconds, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var answer: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4_096)
    while true {
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return (String(decoding: answer, as: UTF8.self), count == 0) }
        answer.append(contentsOf: buffer[..<count])
    }
}

let port = await startServer()
// The control: HTTP/1.1 with `Connection: close` is closed after its answer.
let control = exchange(port: port, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", seconds: 3)
print("HTTP/1.1 with Connection: close: answered \(control.answer.contains(" 200 ")), closed by the server: \(control.closed)")
let plain = exchange(port: port, "GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", seconds: 3)
print("HTTP/1.0 without keep-alive: answered \(plain.answer.contains(" 200 ")), closed by the server: \(plain.closed)")
guard plain.answer.contains(" 200 "), control.closed else {
    print("inconclusive")
    exit(2)
}
if !plain.closed {
    print("still present: an HTTP/1.0 request without keep-alive was answered and its connection left open")
    exit(0)
}
print("fixed upstream: the server closed the HTTP/1.0 connection after answering")
exit(1)

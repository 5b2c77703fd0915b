// Hummingbird 2's connection loop (`HTTPChannelHandler.handleHTTP`), once the responder has
// returned, reads the rest of the request's body from the same `NIOAsyncChannelInboundStream`
// iterator it handed to the request. If anything still reads that body (a task the handler
// started, or a handler a deadline abandoned while it waited for the body), two `next()` calls
// wait on one `NIOThrowingAsyncSequenceProducer` at once and swift-nio stops the process:
// "This should never happen since we only allow a single Iterator to be created". Here a handler
// hands the body to a task that outlives it and answers; the client sent only part of its body.
//
// swift run repro-body-iterator
// Runs the server in a child process of itself. Exit 0: still present (the server stopped).
// Exit 1: fixed upstream (the server answered and kept running). 2: inconclusive.
import Foundation
import Hummingbird

func serve() async throws {
    let router = Router()
    router.post("/") { request, _ -> String in
        Task { for try await _ in request.body {} }  // still reading after the handler returns
        try await Task.sleep(for: .milliseconds(200))  // the reader is now waiting for the rest
        return "answered before the body arrived\n"
    }
    let app = Application(
        router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { FileHandle.standardOutput.write(Data("PORT \($0.localAddress?.port ?? 0)\n".utf8)) })
    try await app.runService()
}

if CommandLine.arguments.dropFirst().first == "--child" {
    try await serve()
    exit(3)
}

let child = Process()
child.executableURL = Bundle.main.executableURL
child.arguments = ["--child"]
child.environment = ProcessInfo.processInfo.environment.merging(["SWIFT_BACKTRACE": "enable=no"]) { $1 }
let output = Pipe(), errors = Pipe()
child.standardOutput = output
child.standardError = errors
try child.run()
var announced = ""
while !announced.contains("\n") {
    let data = output.fileHandleForReading.availableData
    if data.isEmpty { break }
    announced += String(decoding: data, as: UTF8.self)
}
guard let port = announced.split(separator: " ").last.flatMap({ UInt16($0.trimmingCharacters(in: .whitespacesAndNewlines)) }) else {
    print("inconclusive: the server did not start: \(announced)")
    exit(2)
}

// A client that sends the head and 6 of the 100 bytes it announced, then waits.
let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
var address = sockaddr_in()
address.sin_family = sa_family_t(AF_INET)
address.sin_port = port.bigEndian
address.sin_addr.s_addr = inet_addr("127.0.0.1")
let connected = withUnsafePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
}
let request = Array("POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nstate=".utf8)
_ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
var buffer = [UInt8](repeating: 0, count: 4_096)
var timeout = timeval(tv_sec: 3, tv_usec: 0)
setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
let answer = count > 0 ? String(decoding: buffer[..<count], as: UTF8.self).split(separator: "\r\n").first ?? "" : "nothing"
print("connected: \(connected == 0); the server answered: \(answer)")

for _ in 0..<50 where child.isRunning { usleep(100_000) }
if child.isRunning {
    kill(child.processIdentifier, SIGKILL)
    print("fixed upstream: the server answered and kept running while the handler's task still read the body")
    exit(1)
}
let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
let fatal = stderr.split(separator: "\n").first { $0.contains("Fatal error") } ?? ""
if child.terminationReason == .uncaughtSignal && stderr.contains("single Iterator") {
    print("server stopped by signal \(child.terminationStatus): \(fatal)")
    print("still present: the connection loop read the body while the handler's task did, and the process stopped")
    exit(0)
}
print("inconclusive: the server ended with status \(child.terminationStatus)\n\(stderr)")
exit(2)

import Foundation
import NIOHTTP1
import Storage
import Testing
import TestSupport

/// `BROKER_DRAIN_SECONDS` (issue 43): after SIGTERM, `broker serve` answers `/readyz` with 503
/// `shutting_down` while it still serves, every answer says `Connection: close`, and then it
/// stops as it always did.
@Suite(.tags(.load), .serialized) struct DrainTests {
    @Test func aStopDrainsFirst() async throws {
        try await TestDatabase.withFresh { _, url in
            let port = TestPorts.next()
            let base = "http://127.0.0.1:\(port)"
            let instance = BrokerCLI(databaseURL: url, extra: ["BROKER_PORT": "\(port)", "BROKER_DRAIN_SECONDS": "3"])
            let readiness = try ReadinessSocket.open()
            let server = try readiness.notifying(instance).spawn(["serve"])
            defer {
                server.signal(SIGKILL)
                _ = try? ProcessRunner.wait(server)
            }
            try await readiness.awaitReady(server, base: base)
            #expect(await ServedHTTP.send(.GET, "\(base)/readyz", key: nil).status == 200)
            let request = Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
            let before = String(decoding: try await RawHTTP.converse(port: port, request, timeoutSeconds: 1).answer, as: UTF8.self)
            #expect(!before.lowercased().contains("connection: close"), "\(before)")

            server.signal(SIGTERM)
            // Out of rotation, still serving.
            var shuttingDown: [String: Any] = [:]
            let out = try await ServedHTTP.within(.seconds(2)) {
                let answer = await ServedHTTP.send(.GET, "\(base)/readyz", key: nil)
                shuttingDown = answer.body
                return answer.status == 503
            }
            #expect(out != nil, "/readyz did not turn 503 after SIGTERM")
            #expect(shuttingDown["code"] as? String == "shutting_down", "\(shuttingDown)")
            let during = try await RawHTTP.converse(port: port, request, timeoutSeconds: 2)
            let text = String(decoding: during.answer, as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 200"), "\(text)")
            #expect(text.lowercased().contains("connection: close"), "\(text)")
            print("FIGURE drain: the server closed the connection after its answer: \(during.closedByServer)")
            // Then it stops, as without a drain.
            let ended = try await onOwnThread { try ProcessRunner.wait(server) }
            #expect(ended.status == 0, "\(ended.output.suffix(1500))")
            #expect(ended.output.contains("draining"), "\(ended.output.suffix(1500))")
        }
    }
}

import Foundation
import HTTPTypes
import HummingbirdTesting
import TestSupport
import Testing

@testable import BrokerApplication
@testable import BrokerServer

/// Connection exhaustion (issue 25): 1,100 connections sending half a request once made
/// `/healthz` time out for 15 s. With the per-address cap (64) and the header timeout, 2,000
/// half-open connections from one address leave health and readiness answering within 1 s.
/// A timing suite: it runs after the others (scripts/test.sh).
@Suite(.tags(.load)) struct ConnectionFloodTests {
    @Test func healthAndReadinessAnswerWithinASecondUnderTwoThousandHalfOpenConnections() async throws {
        try await TestApp.run(mode: .live) { _, client in
            let port = try #require(client.port)
            var flood: [RawConnection] = []
            for _ in 0..<2_000 {
                let connection = try RawConnection(port: port, from: "127.0.0.2")
                connection.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half: ")
                flood.append(connection)
            }
            for uri in ["/healthz", "/readyz"] {
                // A new connection from another address, as a load balancer's probe makes it.
                let start = ContinuousClock.now
                let probe = try RawConnection(port: port, from: "127.0.0.1")
                probe.send("GET \(uri) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                let answer = await probe.readUntilClosed(timeoutSeconds: 5)
                let elapsed = start.duration(to: .now)
                #expect(answer.answer.hasPrefix("HTTP/1.1 200"), "\(uri): \(answer.answer.prefix(60))")
                #expect(elapsed < .seconds(1), "\(uri) took \(elapsed)")
                print("FIGURE flood: \(uri) answered a new connection in \(elapsed) under 2,000 half-open connections")
                let pooled = ContinuousClock.now
                #expect(try await client.execute(uri: uri, method: .get).status == .ok)
                #expect(pooled.duration(to: .now) < .seconds(1), "\(uri) on the test client's connection")
            }
            for connection in flood { connection.close() }
        }
    }
}

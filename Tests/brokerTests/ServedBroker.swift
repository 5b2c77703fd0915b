import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import Storage
import Testing

/// Waits until a spawned `broker serve` answers `/readyz` with 200, polling every 100 ms for up
/// to 20 s: another process's start has no event this one can await. Fails the test with the
/// server's output when it never gets ready.
func waitUntilReady(_ base: String, _ server: ProcessRunner.Running) async throws {
    var ready = false
    for _ in 0..<200 where !ready {
        ready = (try? await HTTPClient.shared.execute(HTTPClientRequest(url: "\(base)/readyz"), timeout: .seconds(2)))?.status == .ok
        if !ready { try await Task.sleep(for: .milliseconds(100)) }
    }
    try #require(ready, "broker did not start: \(server.output.suffix(2_000))")
}

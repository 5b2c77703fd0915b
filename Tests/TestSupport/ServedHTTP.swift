import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// Requests to a served broker process, and waiting for what it shows (the several-instance,
/// worker-outage and import CLI tests).
public enum ServedHTTP {
    /// A client that opens as many connections as the test asks for at once.
    public static let http: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool = .init(idleTimeout: .seconds(30), concurrentHTTP1ConnectionsPerHostSoftLimit: 100)
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()

    public static func send(
        _ method: HTTPMethod, _ url: String, key: String?, headers: [String: String] = [:], json: String? = nil
    ) async -> (status: Int, body: [String: Any]) {
        var request = HTTPClientRequest(url: url)
        request.method = method
        if let key { request.headers.add(name: "Authorization", value: "Bearer \(key)") }
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: json))
        }
        guard let response = try? await http.execute(request, timeout: .seconds(30)),
            let body = try? await response.body.collect(upTo: 1 << 20)
        else { return (0, [:]) }
        let object = (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]) ?? [:]
        return (Int(response.status.code), object)
    }

    /// Polls `condition` every 20 ms until it holds or `limit` passes; the time it took.
    public static func within(_ limit: Duration, _ condition: () async throws -> Bool) async throws -> Duration? {
        let start = ContinuousClock.now
        while ContinuousClock.now - start < limit {
            if try await condition() { return ContinuousClock.now - start }
            try await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }
}

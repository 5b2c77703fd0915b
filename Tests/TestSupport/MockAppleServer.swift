import Foundation
import Hummingbird
import MockIdP

/// Runs a ``MockAppleIdP`` on 127.0.0.1 (a free port) for the duration of `body`.
public enum MockAppleServer {
    public static func with<T: Sendable>(
        _ body: @Sendable (_ apple: MockAppleIdP, _ baseURL: String) async throws -> T
    ) async throws -> T {
        let apple = try MockAppleIdP()
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = MockIdPServer.application(apple: apple, port: 0) { port in continuation.yield(port) }
        return try await withThrowingTaskGroup(of: Void.self, returning: T.self) { group in
            group.addTask { try await app.run() }
            defer { group.cancelAll() }
            var iterator = stream.makeAsyncIterator()
            guard let port = await iterator.next() else { throw CancellationError() }
            return try await body(apple, "http://127.0.0.1:\(port)")
        }
    }
}

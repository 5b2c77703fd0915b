import Foundation
import Hummingbird
import MockIdP

/// Runs Apple-, Google- and Facebook-shaped mocks on 127.0.0.1 (a free port) for the duration of
/// `body`; the base URL serves all three (``MockIdPServer``).
public enum MockProvidersServer {
    public struct Mocks: Sendable {
        public let apple: MockAppleIdP
        public let google: MockGoogleIdP
        public let facebook: MockFacebookIdP
        public let baseURL: String
    }

    public static func with<T: Sendable>(_ body: @Sendable (Mocks) async throws -> T) async throws -> T {
        let apple = try MockAppleIdP()
        let google = try MockGoogleIdP()
        let facebook = try MockFacebookIdP()
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = MockIdPServer.application(apple: apple, google: google, facebook: facebook, port: 0) { port in
            continuation.yield(port)
        }
        return try await withThrowingTaskGroup(of: Void.self, returning: T.self) { group in
            group.addTask { try await app.run() }
            defer { group.cancelAll() }
            var iterator = stream.makeAsyncIterator()
            guard let port = await iterator.next() else { throw CancellationError() }
            return try await body(Mocks(apple: apple, google: google, facebook: facebook, baseURL: "http://127.0.0.1:\(port)"))
        }
    }
}

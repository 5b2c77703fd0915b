import Foundation
import Hummingbird
import MockIdP

/// Runs a ``MockAppleIdP`` on 127.0.0.1 (a free port) for the duration of `body`.
public enum MockAppleServer {
    public static func with<T: Sendable>(
        _ body: @Sendable (_ apple: MockAppleIdP, _ baseURL: String) async throws -> T
    ) async throws -> T {
        let apple = try MockAppleIdP()
        return try await ServedApplication.with({ listening in
            MockIdPServer.application(apple: apple, port: 0) { port in listening(port) }
        }) { port in
            try await body(apple, "http://127.0.0.1:\(port)")
        }
    }
}

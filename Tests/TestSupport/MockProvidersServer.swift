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
        return try await ServedApplication.with({ listening in
            MockIdPServer.application(apple: apple, google: google, facebook: facebook, port: 0) { port in listening(port) }
        }) { port in
            try await body(Mocks(apple: apple, google: google, facebook: facebook, baseURL: "http://127.0.0.1:\(port)"))
        }
    }
}

import ArgumentParser
import Foundation
import MockIdP

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension MockIdPCommand {
    /// Classic Facebook access tokens live in the serving mock, so they are asked of it over HTTP
    /// (`POST /facebook/test-users`, like Graph's test-users API).
    struct FacebookToken: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "facebook-token",
            abstract: "Ask a running 'mock-idp serve' for classic Facebook user access tokens, one per line.",
            discussion: """
                Token i is for user PREFIX((FIRST + i) mod USERS), or for --user-id. The same with curl: \\
                curl -s -X POST http://127.0.0.1:9100/facebook/test-users -H 'content-type: application/json' \\
                -d '{"app_id":"1000000000001","user_id":"2000000","name":"User 0","email":"user0@example.com"}'
                """)
        @Option(help: "The serving mock's base URL.") var url: String = "http://127.0.0.1:9100"
        @Option(help: "The app id (registered with serve's --facebook-app-id).") var appID: String = "1000000000001"
        @Option(help: "The user id (default: PREFIX + number).") var userID: String?
        @Option(help: "User id prefix.") var userPrefix: String = "2000000"
        @Option(help: "How many tokens.") var count: Int = 1
        @Option(help: "How many distinct users the tokens cycle through (default: --count).") var users: Int?
        @Option(help: "The user number of the first token.") var first: Int = 0
        @Option(help: "The user's name (default: Mock User<number>).") var name: String?
        @Option(help: "The user's email (default: user<number>@example.com).") var email: String?
        @Option(parsing: .unconditional, help: "Seconds until the token expires (negative: already expired; default: never).")
        var expiresIn: Int?

        struct Refused: Error, CustomStringConvertible {
            var answer: String
            var description: String { "The mock refused: \(answer)" }
        }

        func validate() throws {
            guard count >= 0, first >= 0, (users ?? 1) > 0 else {
                throw ValidationError("--count and --first must not be negative; --users must be positive.")
            }
        }

        func run() async throws {
            guard let endpoint = URL(string: MockFacebookIdP.testUsersURL(base: url)) else {
                throw ValidationError("--url is not a URL.")
            }
            let cycle = users ?? max(count, 1)
            for index in 0..<count {
                let number = (first + index) % cycle
                var body: [String: Any] = [
                    "app_id": appID, "user_id": userID ?? "\(userPrefix)\(number)", "name": name ?? "Mock User\(number)",
                    "email": email ?? "user\(number)@example.com",
                ]
                if let expiresIn { body["expires_in"] = expiresIn }
                var request = URLRequest(url: endpoint)
                request.httpMethod = "POST"
                request.setValue("application/json", forHTTPHeaderField: "Content-Type")
                request.httpBody = try JSONSerialization.data(withJSONObject: body)
                let (data, response) = try await URLSession.shared.data(for: request)
                guard (response as? HTTPURLResponse)?.statusCode == 200,
                    let answer = try JSONSerialization.jsonObject(with: data) as? [String: Any],
                    let token = answer["access_token"] as? String
                else {
                    throw Refused(answer: String(decoding: data.prefix(300), as: UTF8.self))
                }
                FileHandle.standardOutput.write(Data((token + "\n").utf8))
            }
        }
    }
}

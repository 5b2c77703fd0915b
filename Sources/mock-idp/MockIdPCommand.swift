import ArgumentParser
import BrokerCore
import Crypto
import Foundation
import Hummingbird
import MockIdP

/// `mock-idp`: an Apple-shaped identity provider on loopback, for demos and benchmarks.
@main
struct MockIdPCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mock-idp",
        abstract: "Apple-shaped identity provider on loopback (tests, demo, benchmarks). Never for production.",
        subcommands: [Serve.self, Mint.self]
    )

    struct KeyOptions: ParsableArguments {
        @Option(help: "PEM file holding the signing key (created when missing), shared by serve and mint.")
        var keyFile: String = "mock-idp-key.pem"
    }

    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Serve /auth/keys, /auth/token and /auth/revoke.")
        @Option(help: "Port on 127.0.0.1.") var port: Int = 9100
        @OptionGroup var key: KeyOptions

        func run() async throws {
            let apple = try MockAppleIdP(keyFile: URL(fileURLWithPath: key.keyFile))
            let app = MockIdPServer.application(apple: apple, port: port) { port in
                print("mock-idp listening on http://127.0.0.1:\(port) (BROKER_APPLE_BASE_URL)")
            }
            try await app.runService()
        }
    }

    struct Mint: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print identity tokens, one per line, signed with the key file.",
            discussion: """
                Token i is for subject PREFIX((FIRST + i) mod SUBJECTS). With --with-nonce each line is \
                "<token> <raw nonce>": the token carries the SHA-256 hex of its own random raw nonce (an \
                Apple client's default nonce mode), which also makes every token distinct.
                """)
        @Option(help: "The client id (token aud).") var audience: String
        @Option(help: "How many tokens.") var count: Int = 1
        @Option(help: "Subject prefix.") var subjectPrefix: String = "000001.mock."
        @Option(help: "How many distinct subjects the tokens cycle through (default: --count).") var subjects: Int?
        @Option(help: "The subject number of the first token.") var first: Int = 0
        @Flag(help: "Give each token a random nonce and print it after the token.") var withNonce = false
        @Option(help: "Token lifetime in seconds.") var lifetime: Int = 86_400
        @OptionGroup var key: KeyOptions

        func validate() throws {
            guard count >= 0, first >= 0, (subjects ?? 1) > 0 else {
                throw ValidationError("--count and --first must not be negative; --subjects must be positive.")
            }
        }

        func run() async throws {
            let apple = try MockAppleIdP(keyFile: URL(fileURLWithPath: key.keyFile))
            let cycle = subjects ?? max(count, 1)
            // RSA signing dominates: sign in one chunk per core, print in order.
            let workers = max(1, ProcessInfo.processInfo.activeProcessorCount)
            let chunk = (count + workers - 1) / max(workers, 1)
            let (audience, prefix, first, lifetime, withNonce) = (audience, subjectPrefix, first, lifetime, withNonce)
            let parts = try await withThrowingTaskGroup(of: (Int, String).self) { group in
                for worker in 0..<workers where worker * chunk < count {
                    group.addTask {
                        var output = ""
                        for index in (worker * chunk)..<min(count, (worker + 1) * chunk) {
                            let number = (first + index) % cycle
                            let raw = withNonce ? Hex.encode(SecureRandom.bytes(16)) : nil
                            let token = try apple.mint(
                                apple.claims(
                                    subject: "\(prefix)\(number)", audience: audience,
                                    nonce: raw.map { Hex.encode(SHA256.hash(data: Data($0.utf8))) },
                                    email: "user\(number)@example.com", lifetime: TimeInterval(lifetime)))
                            output += raw.map { "\(token) \($0)\n" } ?? "\(token)\n"
                        }
                        return (worker, output)
                    }
                }
                return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
            }
            for worker in parts.keys.sorted() { FileHandle.standardOutput.write(Data((parts[worker] ?? "").utf8)) }
        }
    }
}

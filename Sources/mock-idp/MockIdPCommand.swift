import ArgumentParser
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
            abstract: "Print identity tokens, one per line: subjects PREFIX0..PREFIX(N-1), signed with the key file.")
        @Option(help: "The client id (token aud).") var audience: String
        @Option(help: "How many tokens.") var count: Int = 1
        @Option(help: "Subject prefix.") var subjectPrefix: String = "000001.mock."
        @Option(help: "Token lifetime in seconds.") var lifetime: Int = 86_400
        @OptionGroup var key: KeyOptions

        func run() async throws {
            let apple = try MockAppleIdP(keyFile: URL(fileURLWithPath: key.keyFile))
            var output = ""
            for index in 0..<count {
                let subject = "\(subjectPrefix)\(index)"
                output += try apple.mint(
                    apple.claims(
                        subject: subject, audience: audience, email: "user\(index)@example.com",
                        lifetime: TimeInterval(lifetime))) + "\n"
            }
            FileHandle.standardOutput.write(Data(output.utf8))
        }
    }
}


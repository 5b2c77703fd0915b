import Foundation
import TestSupport
import Testing

/// A port that is taken: the error names the address and the setting that moves it (issue 9 §6).
@Suite struct ListenFailureCLITests {
    @Test func serveOnATakenPortSaysWhichAddressAndSetting() async throws {
        try await TestDatabase.withFresh { _, url in
            let taken = try HeldPort()
            defer { taken.close() }
            let cli = BrokerCLI(databaseURL: url, extra: ["BROKER_PORT": "\(taken.port)"])
            let result = try await cli.run("serve")
            #expect(result.status == 1)
            #expect(result.output.contains("127.0.0.1:\(taken.port)"), "\(result.output.suffix(600))")
            #expect(result.output.contains("BROKER_PORT"))
            #expect(!result.output.contains("database is reachable"))
        }
    }

    @Test func demoOnATakenMockPortSaysWhichAddressAndSetting() async throws {
        try await TestDatabase.withFresh { _, url in
            let taken = try HeldPort()
            defer { taken.close() }
            let cli = BrokerCLI(databaseURL: url)
            let result = try await cli.run("demo", "--idp-port", "\(taken.port)")
            #expect(result.status == 1)
            #expect(result.output.contains("127.0.0.1:\(taken.port)"), "\(result.output.suffix(600))")
            #expect(result.output.contains("--idp-port"))
        }
    }
}

import Foundation
import Storage
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
        let taken = try HeldPort()
        defer { taken.close() }
        let folder = NSTemporaryDirectory() + "demo-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // The mock listens first: the demo's own embedded PostgreSQL is never started.
        let cli = BrokerCLI(databaseURL: nil, extra: ["BROKER_DEMO_DATA_DIR": folder])
        let result = try await cli.run("demo", "--idp-port", "\(taken.port)")
        #expect(result.status == 1)
        #expect(result.output.contains("127.0.0.1:\(taken.port)"), "\(result.output.suffix(600))")
        #expect(result.output.contains("--idp-port"))
    }

    /// The demo's MockIdP would sign in to every tenant of the database it runs on: it refuses
    /// `DATABASE_URL`, naming what to do, and writes nothing there (issue 39 B7).
    @Test func demoRefusesADatabaseURLAndWritesNothingThere() async throws {
        try await TestDatabase.withFresh { database, url in
            let cli = BrokerCLI(databaseURL: url)
            let result = try await cli.run("demo")
            #expect(result.status != 0)
            #expect(result.output.contains("DATABASE_URL") && result.output.contains("own embedded PostgreSQL"), "\(result.output)")
            #expect(try await database.tenants.find(slug: "demo") == nil)
        }
    }
}

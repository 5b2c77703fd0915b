import Crypto
import Foundation
import MockIdP
import NIOHTTP1
import Storage
import Testing
import TestSupport

/// Contract fuzzing (issue 25): schemathesis, from PyPI (scripts/test.sh installs it in
/// `.build/schemathesis`), runs every operation of openapi.yaml against a live `broker serve`
/// with a bounded example budget: no 5xx, no response that violates its schema, no undocumented
/// status code, content type or header; requests that violate the schema are refused; a missing
/// API key is 401; `Allow` names what a path allows. One check is left out:
/// `positive_data_acceptance` expects every schema-valid request to succeed, and a broker must
/// refuse schema-valid tokens that are not genuine (an identity token is a string to the schema).
/// `POST /v1/accounts/import` runs without `negative_data_rejection` (the test says why). Each finding it made became a test of its own (HTTPEdgeTests). Its own phase in
/// scripts/test.sh: it loads both cores for a minute.
@Suite(.tags(.fuzz)) struct ContractFuzzTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let openAPI = repository.appendingPathComponent("openapi.yaml").path
    /// The tenant to fuzz discovery with; one operation's check off, with the reason.
    static let configuration = repository.appendingPathComponent("Tests/Fixtures/schemathesis.toml").path

    @Test func schemathesisFindsNothingAcrossTheContract() async throws {
        let schemathesis = try #require(
            ProcessInfo.processInfo.environment["BROKER_SCHEMATHESIS"], "run the tests with scripts/test.sh, which installs schemathesis")
        try await TestDatabase.withFresh { _, url in
            try await MockAppleServer.with { apple, appleURL in
                // schemathesis's authentication checks send hundreds of requests without a key or
                // with a wrong one, from this one address, within seconds: past the default budget of
                // refused keys (5/s, burst 20) some would rightly be 429 where this contract check
                // wants 401. That budget has its own tests (RateLimitTests); here it is out of reach.
                let environment = [
                    "BROKER_APPLE_BASE_URL": appleURL, "BROKER_LOG_LEVEL": "error", "BROKER_FAILED_AUTH_RATE_LIMIT": "100000",
                ]
                let cli = BrokerCLI(databaseURL: url, extra: environment)
                #expect(try await cli.run("tenant", "create", "acme").status == 0)
                let key = try #require(try await cli.run("api-key", "create", "--tenant", "acme", "--json").object()["key"] as? String)
                let p8Key = P256.Signing.PrivateKey()
                apple.registerTeam("TEAM000001", keyID: "KEY0000001", publicKey: p8Key.publicKey)
                let p8 = FileManager.default.temporaryDirectory.appendingPathComponent("AuthKey-\(UUID().uuidString).p8").path
                try p8Key.pemRepresentation.write(toFile: p8, atomically: true, encoding: .utf8)
                defer { try? FileManager.default.removeItem(atPath: p8) }
                #expect(
                    try await cli.run(
                        "apple", "team", "set", "--tenant", "acme", "--team-id", "TEAM000001", "--key-id", "KEY0000001",
                        "--private-key-file", p8
                    ).status == 0)
                #expect(try await cli.run("apple", "group", "add", "--tenant", "acme", "--primary-app-id", "com.acme.app").status == 0)

                let port = TestPorts.next()
                let readiness = try ReadinessSocket.open()
                let server = try readiness.notifying(
                    BrokerCLI(databaseURL: url, extra: environment.merging(["BROKER_PORT": "\(port)"]) { $1 })
                )
                .spawn(["serve"])
                defer {
                    server.signal(SIGKILL)
                    _ = try? ProcessRunner.wait(server)
                }
                let base = "http://127.0.0.1:\(port)"
                try await readiness.awaitReady(server, base: base)
                // POST /v1/accounts/import checks each record on its own, by contract: a record that
                // does not match ImportRecord is that record's `error` (with the reason) and the
                // others go on, so a request whose records violate the schema is answered 200. It
                // runs on its own without `negative_data_rejection`; the body's own shape (1 to
                // 1,000 records) is still refused with 400, as the contract says.
                let runs: [(operations: [String], excluded: String)] = [
                    (["--exclude-operation-id", "importAccounts"], "positive_data_acceptance"),
                    (["--include-operation-id", "importAccounts"], "positive_data_acceptance,negative_data_rejection"),
                ]
                var output = ""
                var status: Int32 = 0
                for run in runs {
                    let fuzz = try ProcessRunner.spawn(
                        schemathesis,
                        [
                            "--config-file", Self.configuration, "run", Self.openAPI, "--url", base, "--header",
                            "Authorization: Bearer \(key)",
                            "--checks", "all", "--exclude-checks", run.excluded,
                            "--phases", "examples,coverage,fuzzing", "--max-examples", "8", "--workers", "1", "--seed", "25",
                            "--request-timeout", "15", "--suppress-health-check", "all", "--no-color",
                        ] + run.operations,
                        environment: [
                            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin", "HOME": NSTemporaryDirectory(),
                        ])
                    let result = try await onOwnThread { try ProcessRunner.wait(fuzz) }
                    output += result.output
                    status = max(status, result.status)
                }
                // Its report without the reproducing commands' bodies (a fuzzed body can be 200 KB).
                let report = output.split(separator: "\n", omittingEmptySubsequences: false)
                    .map { $0.count > 300 ? $0.prefix(300) + " …" : $0 }.joined(separator: "\n")
                #expect(status == 0, "schemathesis:\n\(report.suffix(30_000))\nbroker:\n\(server.output.suffix(2_000))")
            }
        }
    }
}

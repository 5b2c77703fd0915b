import Crypto
import Foundation
import MockIdP
import NIOHTTP1
import PostgresNIO
import Storage
import Testing
import TestSupport

/// PostgreSQL stopped while every kind of queued work is in the middle of its call (issue 25,
/// "Outages beyond the database"): an Apple revocation and webhook deliveries held at the other
/// end by the test, a credential check held at Apple's refresh grant, and an import writing its
/// batches. The calls are answered while PostgreSQL is down, so their outcome can only be
/// written once it is back; the import stops with `import_interrupted` (a `COPY` cut off
/// mid-way used to hang it for good). Afterwards no queued item is lost, none is done twice (Apple and
/// the webhook see each item once), and the import resumes to the same total.
@Suite(.tags(.outage), .serialized) struct WorkerOutageTests {
    static let teamID = "TEAM000001"
    static let keyID = "KEY0000001"
    static let imported = 30_000

    @Test func queuedWorkAndAnImportSurviveAStoppedDatabase() async throws {
        let cluster = try await OwnCluster.create()
        defer { cluster.destroy() }
        try await cluster.start()
        let folder = NSTemporaryDirectory() + "worker-outage-\(UUID().uuidString.prefix(8))/"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let file = folder + "users.jsonl"
        try (0..<Self.imported).map { #"{"external_id":"imp-\#($0)","identities":[{"provider":"apple","subject":"001.imp\#($0)"}]}"# }
            .joined(separator: "\n").appending("\n").write(toFile: file, atomically: true, encoding: .utf8)

        try await MockAppleServer.with { apple, appleURL in
            try await WebhookSink.with { sink in
                let environment = [
                    "BROKER_APPLE_BASE_URL": appleURL, "BROKER_LOG_LEVEL": "warning", "BROKER_WEBHOOK_ALLOW_INSECURE": "1",
                    "BROKER_DB_STATEMENT_TIMEOUT": "2", "BROKER_DB_CONNECT_TIMEOUT": "3", "BROKER_PROVIDER_TIMEOUT": "60",
                ]
                let cli = BrokerCLI(databaseURL: cluster.url, extra: environment)
                let migrated = try await cli.run("db", "migrate")
                try #require(migrated.status == 0, "\(migrated.output)")
                #expect(try await cli.run("tenant", "create", "acme").status == 0)
                let key = try #require(try await cli.run("api-key", "create", "--tenant", "acme", "--json").object()["key"] as? String)
                let p8Key = P256.Signing.PrivateKey()
                apple.registerTeam(Self.teamID, keyID: Self.keyID, publicKey: p8Key.publicKey)
                try p8Key.pemRepresentation.write(toFile: folder + "key.p8", atomically: true, encoding: .utf8)
                for step in [
                    [
                        "apple", "team", "set", "--tenant", "acme", "--team-id", Self.teamID, "--key-id", Self.keyID, "--private-key-file",
                        folder + "key.p8",
                    ],
                    ["apple", "group", "add", "--tenant", "acme", "--primary-app-id", "com.acme.app", "--no-nonce-required"],
                    ["webhook", "set", "--tenant", "acme", "--url", sink.url],
                ] {
                    let result = try await cli.run(step)
                    #expect(result.status == 0, "\(step): \(result.output)")
                }
                // The serving instance checks no credentials of its own: the command below does.
                let port = TestPorts.next()
                let readiness = try ReadinessSocket.open()
                let server = try readiness.notifying(
                    BrokerCLI(
                        databaseURL: cluster.url,
                        extra: environment.merging(["BROKER_PORT": "\(port)", "BROKER_APPLE_CREDENTIAL_CHECK_INTERVAL": "0"]) { $1 }
                    )
                ).spawn(["serve"])
                defer {
                    server.signal(SIGKILL)
                    _ = try? ProcessRunner.wait(server)
                }
                let base = "http://127.0.0.1:\(port)"
                try await readiness.awaitReady(server, base: base)

                // An import under way (it runs through the sign-ins below), paced so that it is in
                // the middle of its file when PostgreSQL stops: each commit of its job's progress
                // takes a quarter of a second more (a fast run once imported all 30,000 before the
                // stop, and there was nothing to interrupt).
                try await Outage.withClient(cluster) { client in
                    for statement: PostgresQuery in [
                        "CREATE TABLE test_import_pace (seconds float8 NOT NULL)",
                        "INSERT INTO test_import_pace VALUES (0.25)",
                        """
                        CREATE FUNCTION test_import_pace() RETURNS trigger LANGUAGE plpgsql AS $$
                        BEGIN
                            PERFORM pg_sleep((SELECT seconds FROM test_import_pace));
                            RETURN NEW;
                        END $$
                        """,
                        "CREATE TRIGGER test_import_pace BEFORE UPDATE ON import_jobs FOR EACH ROW EXECUTE FUNCTION test_import_pace()",
                    ] {
                        _ = try await client.query(statement, logger: TestDatabase.logger).collect()
                    }
                }
                let importing = try cli.spawn([
                    "import", "users", "--tenant", "acme", "--from", "jsonl", "--file", file, "--batch-size", "500", "--json",
                ])
                defer {
                    importing.signal(SIGKILL)
                    _ = try? ProcessRunner.wait(importing)
                }
                var jobID: String?
                let started = try await ServedHTTP.within(.seconds(60)) {
                    try await Outage.withClient(cluster) { client in
                        let rows = try await client.query("SELECT id::text FROM import_jobs WHERE records > 0", logger: TestDatabase.logger)
                        for try await id in rows.decode(String.self) { jobID = id }
                    }
                    return jobID != nil
                }
                try #require(started != nil, "the import did not commit a batch: \(importing.output.suffix(1_000))")

                // Six people sign in with an authorization code (Apple's refresh token kept);
                // their account.created events reach the webhook before anything is held.
                var accounts: [String] = []
                for person in 0..<6 {
                    let subject = "001.person\(person)"
                    let code = apple.issueCode(clientID: "com.acme.app", subject: subject)
                    let token = try apple.mint(apple.claims(subject: subject, audience: "com.acme.app"))
                    let signedIn = await ServedHTTP.send(
                        .POST, "\(base)/v1/sign-in/apple", key: key,
                        json: #"{"client_id":"com.acme.app","identity_token":"\#(token)","authorization_code":"\#(code)"}"#)
                    try #require(signedIn.status == 200, "\(signedIn.body)")
                    accounts.append(try #require((signedIn.body["account"] as? [String: Any])?["id"] as? String))
                }
                await sink.waitForDeliveries(6)

                // From here Apple holds its answers: three people stay (their tokens checked)...
                apple.hold(.revoke)
                apple.hold(.refreshGrant)
                // A failure below must not leave the mocks holding calls (their servers would
                // wait on them at the end of the test).
                defer {
                    apple.release(.revoke)
                    apple.release(.refreshGrant)
                    sink.releaseHeld()
                }
                let checking = try cli.spawn(["apple", "check-credentials", "--tenant", "acme", "--now", "--json"])
                defer {
                    checking.signal(SIGKILL)
                    _ = try? ProcessRunner.wait(checking)
                }
                await apple.waitForArrivals(.refreshGrant, count: 1)
                // ...and three are deleted (three revocations queued, three account.deleted events),
                // with the webhook holding its answers too (held for less than the worker's 10 s).
                sink.answer(.held(then: 204))
                for account in accounts.suffix(3) {
                    let deleted = await ServedHTTP.send(.DELETE, "\(base)/v1/accounts/\(account)", key: key)
                    #expect(deleted.status == 200 && deleted.body["apple_revocations_queued"] as? Int == 1, "\(deleted.body)")
                }
                // Each worker is in the middle of a call, and the import in the middle of its file.
                await apple.waitForArrivals(.revoke, count: 1)
                await sink.waitForDeliveries(7)
                var records = 0
                try await Outage.withClient(cluster) { client in
                    let rows = try await client.query("SELECT records::int8 FROM import_jobs", logger: TestDatabase.logger)
                    for try await value in rows.decode(Int.self) { records = value }
                }
                try #require(records < Self.imported, "the import ended before the stop: \(importing.output.suffix(1_000))")
                await cluster.stop(mode: "fast")
                let stopped = ContinuousClock.now

                // The calls are answered while PostgreSQL is down: what they came to waits in memory.
                apple.release(.revoke)
                apple.release(.refreshGrant)
                sink.releaseHeld()
                let interrupted = try await onOwnThread { try ProcessRunner.wait(importing) }
                #expect(interrupted.status == 1 && interrupted.output.contains("import_interrupted"), "\(interrupted.output.suffix(1_000))")
                #expect(interrupted.output.contains("--resume"))
                try await cluster.start()
                let restarted = ContinuousClock.now
                try await Outage.withClient(cluster) { client in
                    _ = try await client.query("UPDATE test_import_pace SET seconds = 0", logger: TestDatabase.logger).collect()
                }
                // Which outcomes waited in memory (a write that found the pool waiting for the
                // database just waits with it instead, and says nothing).
                let waited = (server.output + checking.output).split(separator: "\n").filter {
                    $0.contains("it is written when the database is back")
                }.map { $0.components(separatedBy: "[Storage] ").last ?? "" }
                print("FIGURE worker outage: outcomes kept while PostgreSQL was down: \(waited)")
                print("FIGURE worker outage: PostgreSQL down for \(restarted - stopped)")

                // Nothing lost: every revocation done, every event delivered, every token checked.
                let checked = try await onOwnThread { try ProcessRunner.wait(checking) }
                #expect(checked.status == 0, "\(checked.output.suffix(1_000))")
                let lines = checked.output.split(separator: "\n")
                let report = lines.firstIndex { $0.hasPrefix("{") }.flatMap {
                    (try? JSONSerialization.jsonObject(with: Data(lines[$0...].joined(separator: "\n").utf8))) as? [String: Any]
                }
                #expect(
                    report?["checked"] as? Int == 3 && report?["still_valid"] as? Int == 3 && report?["revoked"] as? Int == 0,
                    "\(checked.output.suffix(1_000))")
                var revocations: [(String, Int)] = []
                let done = try await ServedHTTP.within(.seconds(60)) {
                    revocations = []
                    try await Outage.withClient(cluster) { client in
                        let rows = try await client.query("SELECT status, attempts FROM apple_revocations", logger: TestDatabase.logger)
                        for try await row in rows.decode((String, Int).self) { revocations.append(row) }
                    }
                    return revocations.count == 3 && revocations.allSatisfy { $0.0 == "done" }
                }
                #expect(done != nil, "revocations \(revocations)")
                print("FIGURE worker outage: revocations done \(ContinuousClock.now - restarted) after PostgreSQL started")
                var events = 0
                try await Outage.withClient(cluster) { client in
                    for try await count in try await client.query("SELECT count(*)::int8 FROM events_outbox", logger: TestDatabase.logger)
                        .decode(Int.self)
                    { events = count }
                }
                #expect(events >= 9, "six account.created and three account.deleted")
                let delivered = try await ServedHTTP.within(.seconds(60)) {
                    var pending = -1
                    try await Outage.withClient(cluster) { client in
                        for try await count in try await client.query(
                            "SELECT count(*)::int8 FROM webhook_deliveries WHERE status <> 'delivered'", logger: TestDatabase.logger
                        ).decode(Int.self) { pending = count }
                    }
                    return pending == 0 && sink.deliveries.count >= events
                }
                #expect(delivered != nil, "\(sink.deliveries.count) of \(events) events delivered")
                print("FIGURE worker outage: every event delivered \(ContinuousClock.now - restarted) after PostgreSQL started")
                // Deliveries that took more than one attempt, and why (a retry waits 30 s).
                var retried: [String] = []
                try await Outage.withClient(cluster) { client in
                    for try await (attempts, error) in try await client.query(
                        "SELECT attempts, coalesce(last_error, '') FROM webhook_deliveries WHERE attempts > 1", logger: TestDatabase.logger
                    ).decode((Int, String).self) { retried.append("\(attempts) attempts, last error \(error)") }
                }
                print("FIGURE worker outage: deliveries retried: \(retried)")

                // None done twice.
                #expect(apple.arrivals(.revoke) == 3, "Apple was asked to revoke \(apple.arrivals(.revoke)) times")
                #expect(Set(apple.revokedTokens).count == 3 && apple.revokedTokens.count == 3)
                #expect(revocations.allSatisfy { $0.1 == 1 }, "one attempt each: \(revocations)")
                #expect(apple.arrivals(.refreshGrant) == 3, "Apple's refresh grant was asked \(apple.arrivals(.refreshGrant)) times")
                let ids = sink.deliveries.map(\.id)
                #expect(Set(ids).count == ids.count && ids.count == events, "\(ids.count) deliveries of \(Set(ids).count) events")

                // The import resumes after its last committed batch, to the file's total.
                let id = try #require(jobID)
                let resumed = try await cli.run([
                    "import", "users", "--tenant", "acme", "--from", "jsonl", "--file", file, "--resume", id, "--json",
                ])
                #expect(resumed.status == 0, "\(resumed.output.suffix(1_000))")
                let job = (try? resumed.object()) ?? [:]
                #expect(job["job_id"] as? String == id && job["records"] as? Int == Self.imported, "\(job)")
                try await Outage.withClient(cluster) { client in
                    let rows = try await client.query(
                        "SELECT count(*)::int8, count(DISTINCT external_id)::int8 FROM accounts WHERE external_id LIKE 'imp-%'",
                        logger: TestDatabase.logger)
                    for try await (accounts, distinct) in rows.decode((Int, Int).self) {
                        #expect(accounts == Self.imported && distinct == Self.imported, "\(accounts) accounts, \(distinct) external ids")
                    }
                    let jobs = try await client.query(
                        "SELECT count(*)::int8 FROM import_jobs WHERE status = 'completed'", logger: TestDatabase.logger)
                    for try await count in jobs.decode(Int.self) { #expect(count == 1, "one job, completed") }
                }
            }
        }
    }
}

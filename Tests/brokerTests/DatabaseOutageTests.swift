import AsyncHTTPClient
import BrokerCore
import Crypto
import Foundation
import MockIdP
import NIOCore
import NIOHTTP1
import PostgresNIO
import Storage
import Synchronization
import Testing
import TestSupport

/// PostgreSQL stopped and started, and its connections killed, under sign-in load against the
/// real `broker serve` (decision 0015): every request is answered in bounded time with 200 or
/// 503 `database_unavailable` + `Retry-After`, `/readyz` turns 503 within about a second, the
/// broker recovers without a restart, nothing is lost or duplicated, and SIGTERM ends it within
/// 15 s while the database is down. Figures are printed for docs/benchmarks.md.
@Suite(.tags(.outage), .serialized) struct DatabaseOutageTests {
    /// A PostgreSQL cluster of the test's own (the shared test cluster must stay up). `pg_ctl`
    /// and `initdb` are waited on off the cooperative pool (``onOwnThread(_:)``): a load runs
    /// beside them, and its answers are timed.
    struct Cluster: Sendable {
        let directory: String
        let port: Int
        let bin: String
        var user: String? { getuid() == 0 ? "postgres" : nil }
        var url: String { "postgres:///postgres?host=\(directory)&port=\(port)&user=postgres" }

        static func create() async throws -> Cluster {
            try await onOwnThread { try createBlocking() }
        }

        private static func createBlocking() throws -> Cluster {
            guard let bin = ProcessInfo.processInfo.environment["BROKER_POSTGRES_BIN"] else {
                throw ClusterFailed(output: "BROKER_POSTGRES_BIN is not set: run the tests with scripts/test.sh")
            }
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ib-outage-\(UUID().uuidString.prefix(8))").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let cluster = Cluster(directory: directory, port: Int.random(in: 20_000...30_000), bin: bin)
            if let user = cluster.user { _ = try ProcessRunner.run("/bin/chown", [user, directory]) }
            let initdb = try ProcessRunner.run(
                "\(bin)/initdb", ["-D", "\(directory)/data", "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-instructions"],
                as: cluster.user)
            guard initdb.status == 0 else { throw ClusterFailed(output: initdb.output) }
            return cluster
        }

        /// `listen`: TCP addresses to listen on besides the socket (none by default).
        func start(listen: String = "") async throws {
            try await onOwnThread { try startBlocking(listen: listen) }
        }

        private func startBlocking(listen: String) throws {
            let result = try ProcessRunner.run(
                "\(bin)/pg_ctl",
                [
                    "-D", "\(directory)/data", "-l", "\(directory)/server.log", "-w", "-s", "-o",
                    "-c listen_addresses='\(listen)' -k \(directory) -p \(port) -c max_connections=50", "start",
                ],
                as: user)
            guard result.status == 0 else { throw ClusterFailed(output: result.output) }
            // The role broker serve connects as (BrokerCLI serves as it), before a migration
            // grants it its privileges; a restart finds it there.
            let role = try ProcessRunner.run(
                "\(bin)/psql",
                [
                    "-h", directory, "-p", "\(port)", "-U", "postgres", "-d", "postgres", "-qX", "-c",
                    "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'broker_serve') THEN CREATE ROLE broker_serve LOGIN; END IF; END $$",
                ],
                as: user)
            guard role.status == 0 else { throw ClusterFailed(output: role.output) }
        }

        /// What `pg_ctl stop` said: its status and output.
        @discardableResult func stop(mode: String = "fast") async -> String {
            await onOwnThread { stopBlocking(mode: mode) }
        }

        private func stopBlocking(mode: String) -> String {
            do {
                let result = try ProcessRunner.run("\(bin)/pg_ctl", ["-D", "\(directory)/data", "-m", mode, "-w", "-s", "stop"], as: user)
                return "status \(result.status): \(result.output)"
            } catch {
                return "not run: \(error)"
            }
        }

        /// Synchronous: it runs in a `defer`, when the test is over.
        func destroy() {
            _ = stopBlocking(mode: "immediate")
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    struct ClusterFailed: Error, CustomStringConvertible {
        let output: String
        var description: String { "PostgreSQL: \(output)" }
    }

    /// One answered request.
    struct Answer: Sendable {
        let status: Int
        let code: String?
        let retryAfter: String?
        let seconds: Double
        let subject: String
        let at: ContinuousClock.Instant
    }

    /// The broker on `cluster`, with a tenant, an API key and an Apple app group, and MockIdP as Apple.
    struct Broker: Sendable {
        let base: String
        let key: String
        let server: ProcessRunner.Running
        let apple: MockAppleIdP

        func signIn(_ subject: String) async -> Answer {
            let token = (try? apple.mint(apple.claims(subject: subject, audience: "com.acme.app"))) ?? ""
            let answer = await send(.POST, "/v1/sign-in/apple", json: #"{"client_id":"com.acme.app","identity_token":"\#(token)"}"#)
            return Answer(
                status: answer.status, code: answer.body["code"] as? String, retryAfter: answer.retryAfter, seconds: answer.seconds,
                subject: subject, at: ContinuousClock.now)
        }

        /// One request: its status, JSON body, Retry-After and how long it took (status 0: no answer).
        func send(_ method: HTTPMethod, _ path: String, headers: [String: String] = [:], json: String? = nil) async
            -> (status: Int, body: [String: Any], retryAfter: String?, seconds: Double)
        {
            let start = ContinuousClock.now
            var request = HTTPClientRequest(url: "\(base)\(path)")
            request.method = method
            request.headers.add(name: "Authorization", value: "Bearer \(key)")
            for (name, value) in headers { request.headers.add(name: name, value: value) }
            if let json {
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(string: json))
            }
            guard let response = try? await HTTPClient.shared.execute(request, timeout: .seconds(30)),
                let body = try? await response.body.collect(upTo: 1 << 20)
            else { return (0, [:], nil, (ContinuousClock.now - start).seconds) }
            let object = (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]) ?? [:]
            return (Int(response.status.code), object, response.headers.first(name: "Retry-After"), (ContinuousClock.now - start).seconds)
        }

        func readiness() async -> Int {
            var request = HTTPClientRequest(url: "\(base)/readyz")
            request.method = .GET
            guard let response = try? await HTTPClient.shared.execute(request, timeout: .seconds(5)) else { return 0 }
            return Int(response.status.code)
        }
    }

    static func withBroker(
        _ cluster: Cluster, extra: [String: String] = [:], _ body: @Sendable (Broker, BrokerCLI) async throws -> Void
    ) async throws {
        try await MockAppleServer.with { apple, appleURL in
            let port = Int.random(in: 40_001...60_000)
            // The storms are about outages: the API key's rate limit (200/s, burst 400) is raised
            // out of their way, as a fast machine sends them quicker than that.
            let cli = BrokerCLI(
                databaseURL: cluster.url,
                extra: [
                    "BROKER_PORT": "\(port)", "BROKER_APPLE_BASE_URL": appleURL, "BROKER_LOG_LEVEL": "warning",
                    "BROKER_API_KEY_RATE_LIMIT": "100000",
                ]
                .merging(extra) { $1 })
            let migrated = try await cli.run("db", "migrate")
            try #require(migrated.status == 0, "\(migrated.output)")
            #expect(try await cli.run("tenant", "create", "acme").status == 0)
            let created = try await cli.run("api-key", "create", "--tenant", "acme", "--json")
            let key = (try? JSONSerialization.jsonObject(with: Data(created.output.utf8)) as? [String: Any])?["key"] as? String
            let p8 = FileManager.default.temporaryDirectory.appendingPathComponent("AuthKey-\(UUID().uuidString).p8").path
            try P256.Signing.PrivateKey().pemRepresentation.write(toFile: p8, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(atPath: p8) }
            #expect(
                try await cli.run(
                    "apple", "team", "set", "--tenant", "acme", "--team-id", "TEAM000001", "--key-id", "KEY0000001", "--private-key-file",
                    p8
                ).status == 0)
            #expect(
                try await cli.run("apple", "group", "add", "--tenant", "acme", "--primary-app-id", "com.acme.app", "--no-nonce-required")
                    .status == 0)
            let readiness = try ReadinessSocket.open()
            let server = try readiness.notifying(cli).spawn(["serve"])
            defer {
                server.signal(SIGKILL)
                _ = try? ProcessRunner.wait(server)
            }
            let broker = Broker(base: "http://127.0.0.1:\(port)", key: key ?? "", server: server, apple: apple)
            try await readiness.awaitReady(server, base: broker.base)
            try await body(broker, cli)
        }
    }

    /// The answers of a load run, and whether it should stop.
    final class Recorder: Sendable {
        private struct State {
            var stopped = false
            var answers: [Answer] = []
            var waiters: [(matches: @Sendable (Answer) -> Bool, continuation: CheckedContinuation<Answer, Never>)] = []
        }
        private let state = Mutex(State())
        var stopped: Bool { state.withLock { $0.stopped } }
        var answers: [Answer] { state.withLock { $0.answers } }
        func stop() { state.withLock { $0.stopped = true } }

        func record(_ answer: Answer) {
            let woken = state.withLock { state in
                state.answers.append(answer)
                // Each waiter's predicate sees each answer once (a counting one counts it once).
                var woken: [CheckedContinuation<Answer, Never>] = []
                state.waiters.removeAll { waiter in
                    guard waiter.matches(answer) else { return false }
                    woken.append(waiter.continuation)
                    return true
                }
                return woken
            }
            for continuation in woken { continuation.resume(returning: answer) }
        }

        /// Returns once `count` answers that match have been recorded (already, or from now
        /// on): the load has run that far. An event, no polling; throws when it has not come
        /// within `bound` (the test fails instead of waiting for good).
        func wait(
            for count: Int, within bound: Duration = .seconds(60), where matches: @escaping @Sendable (Answer) -> Bool
        ) async throws {
            let seen = Mutex(0)
            _ = try await withDeadline(bound) {
                await self.first { answer in
                    guard matches(answer) else { return false }
                    return seen.withLock { seen in
                        seen += 1
                        return seen >= count
                    }
                }
            }
        }

        /// The first answer recorded (already, or from now on) that `matches`: an event, no polling.
        func first(where matches: @escaping @Sendable (Answer) -> Bool) async -> Answer {
            await withCheckedContinuation { continuation in
                let found = state.withLock { state -> Answer? in
                    if let answer = state.answers.first(where: matches) { return answer }
                    state.waiters.append((matches, continuation))
                    return nil
                }
                if let found { continuation.resume(returning: found) }
            }
        }
    }

    /// Sign-in load from `workers` loops until the recorder is stopped; each sign-in a new person.
    static func load(_ broker: Broker, workers: Int, _ recorder: Recorder) async {
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<workers {
                group.addTask {
                    var n = 0
                    while !recorder.stopped {
                        recorder.record(await broker.signIn("outage.\(worker).\(n)"))
                        n += 1
                    }
                }
            }
        }
    }

    /// `body` with a client of its own on `cluster`.
    static func withClient(
        _ cluster: Cluster, statementTimeout: Duration = .seconds(30), _ body: (PostgresClient) async throws -> Void
    ) async throws {
        var configuration = try DatabaseConfiguration(url: cluster.url, maxConnections: 1)
        configuration.statementTimeout = statementTimeout
        let client = PostgresClient(configuration: try configuration.clientConfiguration(), backgroundLogger: TestDatabase.logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            try await body(client)
        }
    }

    /// Checks the database after the storm: one account per identity, one session per
    /// identity (every person signed in once), every answered 200 there.
    static func checkDatabase(_ cluster: Cluster, succeeded: Set<String>) async throws {
        try await withClient(cluster, statementTimeout: .seconds(60)) { client in
            let rows = try await client.query(
                """
                SELECT i.subject, (SELECT count(*) FROM accounts a WHERE a.id = i.account_id)::int8,
                    (SELECT count(*) FROM sessions s WHERE s.identity_id = i.id)::int8
                FROM identities i
                """, logger: TestDatabase.logger)
            var stored: Set<String> = []
            for try await (subject, accounts, sessions) in rows.decode((String, Int, Int).self) {
                stored.insert(subject)
                #expect(accounts == 1, "\(subject): \(accounts) accounts")
                #expect(sessions == 1, "\(subject): \(sessions) sessions")
            }
            #expect(succeeded.isSubset(of: stored), "signed in but not stored: \(succeeded.subtracting(stored).prefix(5))")
            let orphans = try await client.query(
                "SELECT (SELECT count(*) FROM accounts a WHERE NOT EXISTS (SELECT 1 FROM identities i WHERE i.account_id = a.id))::int8",
                logger: TestDatabase.logger)
            for try await count in orphans.decode(Int.self) { #expect(count == 0, "accounts without an identity") }
        }
    }

    /// How long an answer may take as this client sees it: the broker's request deadline (3 s)
    /// plus scheduling slack. Alone, the slowest answer is about 3.4 s; under the whole test
    /// suite's load on two cores the broker process and this client wait for CPU, and 7.1 s was
    /// seen once. A hang (the failure this guards against) never answers at all.
    static let answerBound: Double = 3 + 6

    /// `timeoutsAllowed`: PostgreSQL stayed reachable (its connections were killed, new ones
    /// accepted), so a request that waited out its deadline behind the reconnects is
    /// `request_timeout`, not `database_unavailable`.
    static func checkAnswers(_ answers: [Answer], bound: Double, timeoutsAllowed: Bool = false) {
        let statuses = Dictionary(grouping: answers, by: \.status).mapValues(\.count)
        #expect(
            Set(statuses.keys).isSubset(of: [200, 503]),
            "statuses \(statuses); e.g. \(answers.first { ![200, 503].contains($0.status) }.map { "\($0.status) \($0.code ?? "")" } ?? "")")
        // Every 503 of an outage says so (decision 0032): a request that waited on the outage
        // is `database_unavailable` even when the database is back by its deadline.
        for answer in answers where answer.status == 503 {
            #expect(
                answer.code == "database_unavailable" || (timeoutsAllowed && answer.code == "request_timeout"), "\(answer.code ?? "-")")
            #expect(answer.retryAfter != nil)
        }
        let slowest = answers.map(\.seconds).max() ?? 0
        let slowestFive = answers.sorted { $0.seconds > $1.seconds }.prefix(5).map {
            "\($0.subject) \($0.status) \($0.code ?? "-") took \($0.seconds) s"
        }
        #expect(slowest < bound, "slowest answer \(slowest) s; slowest five: \(slowestFive)")
    }

    @Test func postgresStoppedAndStartedUnderLoad() async throws {
        let cluster = try await Cluster.create()
        defer { cluster.destroy() }
        try await cluster.start()
        try await Self.withBroker(cluster, extra: ["BROKER_REQUEST_TIMEOUT": "3", "BROKER_DB_STATEMENT_TIMEOUT": "2"]) { broker, _ in
            let recorder = Recorder()
            async let loading: Void = Self.load(broker, workers: 6, recorder)
            defer { recorder.stop() }  // also when a wait below throws: the load ends with the test

            // The load runs until 20 sign-ins have succeeded.
            try await recorder.wait(for: 20) { $0.status == 200 }
            let stopped = ContinuousClock.now
            await cluster.stop(mode: "fast")
            // Readiness turns 503 within about a second of the database going away.
            var notReadyAfter: Double?
            while notReadyAfter == nil, ContinuousClock.now - stopped < .seconds(10) {
                if await broker.readiness() == 503 { notReadyAfter = (ContinuousClock.now - stopped).seconds }
            }
            // The outage lasts until every worker has been answered 503 twice over.
            try await recorder.wait(for: 12) { $0.status == 503 && $0.at > stopped }
            try await cluster.start()
            let restarted = ContinuousClock.now
            let recovered = await recorder.first { $0.status == 200 && $0.at > restarted }
            let recoveredAfter: Double? = (recovered.at - restarted).seconds
            // Served again: 20 more sign-ins succeed before the load stops.
            try await recorder.wait(for: 20) { $0.status == 200 && $0.at > restarted }
            recorder.stop()
            await loading

            let all = recorder.answers
            let counts = Dictionary(grouping: all, by: \.status).mapValues(\.count)
            print(
                "outage: \(all.count) sign-ins, statuses \(counts), /readyz 503 after \(notReadyAfter ?? -1) s, first 200 \(recoveredAfter ?? -1) s after PostgreSQL started, slowest \(all.map(\.seconds).max() ?? 0) s"
            )
            #expect((notReadyAfter ?? 99) < 2.5, "readiness took \(notReadyAfter ?? -1) s")
            #expect((recoveredAfter ?? 99) < 10, "recovery took \(recoveredAfter ?? -1) s")
            #expect((counts[503] ?? 0) > 0, "the outage was seen")
            Self.checkAnswers(all, bound: Self.answerBound)
            try await Self.checkDatabase(cluster, succeeded: Set(all.filter { $0.status == 200 }.map(\.subject)))
        }
    }

    @Test func killedConnectionsAndSigtermWithTheDatabaseDown() async throws {
        let cluster = try await Cluster.create()
        defer { cluster.destroy() }
        try await cluster.start()
        try await Self.withBroker(cluster, extra: ["BROKER_REQUEST_TIMEOUT": "3", "BROKER_DB_POOL_SIZE": "1"]) { broker, _ in
            // A pool of one serves requests (the LISTEN connection is outside it).
            #expect(await broker.signIn("pool.one").status == 200)
            let recorder = Recorder()
            async let loading: Void = Self.load(broker, workers: 4, recorder)
            defer { recorder.stop() }  // also when a wait below throws: the load ends with the test
            try await recorder.wait(for: 10) { $0.status == 200 }
            // Every connection of the broker killed under load, three times, each time once
            // the workers have been answered 8 more times.
            try await Self.withClient(cluster) { admin in
                for _ in 0..<3 {
                    let killed = ContinuousClock.now
                    _ = try await admin.query(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'",
                        logger: TestDatabase.logger
                    ).collect()
                    try await recorder.wait(for: 8) { $0.at > killed }
                }
            }
            // Then until 20 sign-ins have succeeded after the last kill.
            let lastKill = ContinuousClock.now
            try await recorder.wait(for: 20) { $0.status == 200 && $0.at > lastKill }
            recorder.stop()
            await loading
            let all = recorder.answers
            let last = all.suffix(20)
            print("terminated connections: \(all.count) sign-ins, statuses \(Dictionary(grouping: all, by: \.status).mapValues(\.count))")
            Self.checkAnswers(all, bound: Self.answerBound, timeoutsAllowed: true)
            #expect(last.contains { $0.status == 200 }, "recovered after the connections were killed")
            try await Self.checkDatabase(cluster, succeeded: Set(all.filter { $0.status == 200 }.map(\.subject)))

            // SIGTERM with the database down: the process ends within 15 s.
            await cluster.stop(mode: "immediate")
            async let during = broker.signIn("during.shutdown")
            // Signalled once the broker has seen the database go (its readiness answers 503,
            // within a second), with that sign-in on its way.
            #expect(await broker.readiness() == 503)
            let signalled = ContinuousClock.now
            broker.server.signal(SIGTERM)
            let exited = try await onOwnThread { try ProcessRunner.wait(broker.server) }
            let seconds = (ContinuousClock.now - signalled).seconds
            print("SIGTERM with PostgreSQL down: exited in \(seconds) s with status \(exited.status)")
            #expect(seconds < 15)
            _ = await during
        }
    }

    /// Linking an identity while PostgreSQL is down: 503 `database_unavailable` with Retry-After
    /// in bounded time, nothing written; the same request links once PostgreSQL is back, and a
    /// client's retry of it is a no-op (200).
    @Test func linkingWithThePostgresDown() async throws {
        let cluster = try await Cluster.create()
        defer { cluster.destroy() }
        try await cluster.start()
        try await Self.withBroker(cluster, extra: ["BROKER_REQUEST_TIMEOUT": "3", "BROKER_DB_STATEMENT_TIMEOUT": "2"]) { broker, _ in
            let token = try broker.apple.mint(broker.apple.claims(subject: "001.link-owner", audience: "com.acme.app"))
            let signedIn = await broker.send(
                .POST, "/v1/sign-in/apple", json: #"{"client_id":"com.acme.app","identity_token":"\#(token)"}"#)
            try #require(signedIn.status == 200, "\(signedIn.body)")
            let account = try #require((signedIn.body["account"] as? [String: Any])?["id"] as? String)
            let access = try #require((signedIn.body["session"] as? [String: Any])?["access_token"] as? String)
            let proof = try broker.apple.mint(broker.apple.claims(subject: "001.link-other", audience: "com.acme.app"))
            let link = #"{"provider":"apple","client_id":"com.acme.app","identity_token":"\#(proof)"}"#
            func linkIt() async -> (status: Int, body: [String: Any], retryAfter: String?, seconds: Double) {
                await broker.send(.POST, "/v1/accounts/\(account)/identities", headers: ["X-Account-Token": access], json: link)
            }

            await cluster.stop(mode: "fast")
            let down = await linkIt()
            print("link with PostgreSQL down: \(down.status) \(down.body["code"] ?? "-") in \(down.seconds) s")
            #expect(down.status == 503)
            #expect(down.body["code"] as? String == "database_unavailable" || down.body["code"] as? String == "request_timeout")
            #expect(down.retryAfter != nil)
            #expect(down.seconds < Self.answerBound)

            try await cluster.start()
            var linked = await linkIt()
            let deadline = ContinuousClock.now + .seconds(10)
            while linked.status == 503, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
                linked = await linkIt()
            }
            #expect(linked.status == 201, "\(linked.body)")
            // The link spent its proof (decision 0032): a retry with the same token is refused and
            // changes nothing; a retry with a fresh token would be the 200 no-op.
            let retried = await linkIt()
            #expect(retried.status == 401 && retried.body["code"] as? String == "token_replayed", "\(retried.body)")

            try await Self.withClient(cluster) { client in
                let rows = try await client.query(
                    "SELECT count(*)::int8, count(DISTINCT account_id)::int8 FROM identities", logger: TestDatabase.logger)
                for try await (identities, accounts) in rows.decode((Int, Int).self) {
                    #expect(identities == 2)
                    #expect(accounts == 1)
                }
                let audit = try await client.query(
                    "SELECT count(*)::int8 FROM audit_log WHERE action = 'identity.linked'", logger: TestDatabase.logger)
                for try await count in audit.decode(Int.self) { #expect(count == 1) }
            }
        }
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

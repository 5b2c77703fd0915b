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

/// The harness of the database outage tests (`DatabaseOutageTests`, `LongDatabaseOutageTests`,
/// `WorkerOutageTests`): a broker served on a cluster of the test's own, a sign-in load, the
/// answers it recorded and the checks on them and on the rows.
public enum Outage {
    /// One answered request.
    public struct Answer: Sendable {
        public let status: Int
        public let code: String?
        public let retryAfter: String?
        public let seconds: Double
        public let subject: String
        public let at: ContinuousClock.Instant
    }

    /// The broker on `cluster`, with a tenant, an API key and an Apple app group, and MockIdP as Apple.
    public struct Broker: Sendable {
        public let base: String
        public let key: String
        public let server: ProcessRunner.Running
        public let apple: MockAppleIdP

        public func signIn(_ subject: String) async -> Answer {
            let token = (try? apple.mint(apple.claims(subject: subject, audience: "com.acme.app"))) ?? ""
            let answer = await send(.POST, "/v1/sign-in/apple", json: #"{"client_id":"com.acme.app","identity_token":"\#(token)"}"#)
            return Answer(
                status: answer.status, code: answer.body["code"] as? String, retryAfter: answer.retryAfter, seconds: answer.seconds,
                subject: subject, at: ContinuousClock.now)
        }

        /// One request: its status, JSON body, Retry-After and how long it took (status 0: no answer).
        public func send(_ method: HTTPMethod, _ path: String, headers: [String: String] = [:], json: String? = nil) async
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

        public func readiness() async -> Int {
            var request = HTTPClientRequest(url: "\(base)/readyz")
            request.method = .GET
            guard let response = try? await HTTPClient.shared.execute(request, timeout: .seconds(5)) else { return 0 }
            return Int(response.status.code)
        }
    }

    public static func withBroker(
        _ cluster: OwnCluster, extra: [String: String] = [:], _ body: @Sendable (Broker, BrokerCLI) async throws -> Void
    ) async throws {
        try await MockAppleServer.with { apple, appleURL in
            let port = TestPorts.next()
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
    public final class Recorder: Sendable {
        private struct State {
            var stopped = false
            var answers: [Answer] = []
            var waiters: [(matches: @Sendable (Answer) -> Bool, continuation: CheckedContinuation<Answer, Never>)] = []
        }
        private let state = Mutex(State())

        public init() {}

        public var stopped: Bool { state.withLock { $0.stopped } }
        public var answers: [Answer] { state.withLock { $0.answers } }
        public func stop() { state.withLock { $0.stopped = true } }

        public func record(_ answer: Answer) {
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
        public func wait(
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
        public func first(where matches: @escaping @Sendable (Answer) -> Bool) async -> Answer {
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
    public static func load(_ broker: Broker, workers: Int, _ recorder: Recorder) async {
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
    public static func withClient(
        _ cluster: OwnCluster, statementTimeout: Duration = .seconds(30), _ body: (PostgresClient) async throws -> Void
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
    public static func checkDatabase(_ cluster: OwnCluster, succeeded: Set<String>) async throws {
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
    public static let answerBound: Double = 3 + 6

    /// `timeoutsAllowed`: PostgreSQL stayed reachable (its connections were killed, new ones
    /// accepted), so a request that waited out its deadline behind the reconnects is
    /// `request_timeout`, not `database_unavailable`.
    public static func checkAnswers(_ answers: [Answer], bound: Double, timeoutsAllowed: Bool = false) {
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
}

extension Duration {
    /// The duration in seconds, fractions included.
    public var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

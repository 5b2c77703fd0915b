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
    @Test func postgresStoppedAndStartedUnderLoad() async throws {
        let cluster = try await OwnCluster.create()
        defer { cluster.destroy() }
        try await cluster.start()
        try await Outage.withBroker(cluster, extra: ["BROKER_REQUEST_TIMEOUT": "3", "BROKER_DB_STATEMENT_TIMEOUT": "2"]) { broker, _ in
            let recorder = Outage.Recorder()
            async let loading: Void = Outage.load(broker, workers: 6, recorder)
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
            Outage.checkAnswers(all, bound: Outage.answerBound)
            try await Outage.checkDatabase(cluster, succeeded: Set(all.filter { $0.status == 200 }.map(\.subject)))
        }
    }

    @Test func killedConnectionsAndSigtermWithTheDatabaseDown() async throws {
        let cluster = try await OwnCluster.create()
        defer { cluster.destroy() }
        try await cluster.start()
        try await Outage.withBroker(cluster, extra: ["BROKER_REQUEST_TIMEOUT": "3", "BROKER_DB_POOL_SIZE": "1"]) { broker, _ in
            // A pool of one serves requests (the LISTEN connection is outside it).
            #expect(await broker.signIn("pool.one").status == 200)
            let recorder = Outage.Recorder()
            async let loading: Void = Outage.load(broker, workers: 4, recorder)
            defer { recorder.stop() }  // also when a wait below throws: the load ends with the test
            try await recorder.wait(for: 10) { $0.status == 200 }
            // Every connection of the broker killed under load, three times, each time once
            // the workers have been answered 8 more times.
            try await Outage.withClient(cluster) { admin in
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
            Outage.checkAnswers(all, bound: Outage.answerBound, timeoutsAllowed: true)
            #expect(last.contains { $0.status == 200 }, "recovered after the connections were killed")
            try await Outage.checkDatabase(cluster, succeeded: Set(all.filter { $0.status == 200 }.map(\.subject)))

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

    /// A database that refuses writes under load, as a standby does between a primary's death
    /// and its own promotion (failover.sh meets one behind HAProxy; decision 0088): every
    /// write refused as read-only (25006) is 503 `database_unavailable` with Retry-After, never
    /// 500, and the broker serves again as soon as the database accepts writes, with no
    /// restart. Made read-only here by `default_transaction_read_only`, which a reload applies
    /// to the broker's open connections: the same SQLSTATE a hot standby answers.
    @Test func aDatabaseThatRefusesWritesUnderLoad() async throws {
        let cluster = try await OwnCluster.create()
        defer { cluster.destroy() }
        try await cluster.start()
        try await Outage.withBroker(cluster, extra: ["BROKER_REQUEST_TIMEOUT": "3"]) { broker, _ in
            let recorder = Outage.Recorder()
            async let loading: Void = Outage.load(broker, workers: 4, recorder)
            defer { recorder.stop() }  // also when a wait below throws: the load ends with the test
            try await recorder.wait(for: 20) { $0.status == 200 }
            try await Outage.withClient(cluster) { admin in
                // This session stays writable whatever the reload says.
                _ = try await admin.query("SET default_transaction_read_only = off", logger: TestDatabase.logger).collect()
                _ = try await admin.query("ALTER SYSTEM SET default_transaction_read_only = on", logger: TestDatabase.logger).collect()
                _ = try await admin.query("SELECT pg_reload_conf()", logger: TestDatabase.logger).collect()
                let readOnly = ContinuousClock.now
                // Twelve refusals (checkAnswers says which status they had).
                try await recorder.wait(for: 12) { $0.status != 200 && $0.at > readOnly }
                _ = try await admin.query("ALTER SYSTEM RESET default_transaction_read_only", logger: TestDatabase.logger).collect()
                _ = try await admin.query("SELECT pg_reload_conf()", logger: TestDatabase.logger).collect()
            }
            let writable = ContinuousClock.now
            try await recorder.wait(for: 20) { $0.status == 200 && $0.at > writable }
            recorder.stop()
            await loading
            let all = recorder.answers
            print("read-only database: \(all.count) sign-ins, statuses \(Dictionary(grouping: all, by: \.status).mapValues(\.count))")
            Outage.checkAnswers(all, bound: Outage.answerBound)
            try await Outage.checkDatabase(cluster, succeeded: Set(all.filter { $0.status == 200 }.map(\.subject)))
        }
    }

    /// Linking an identity while PostgreSQL is down: 503 `database_unavailable` with Retry-After
    /// in bounded time, nothing written; the same request links once PostgreSQL is back, and a
    /// client's retry of it is a no-op (200).
    @Test func linkingWithThePostgresDown() async throws {
        let cluster = try await OwnCluster.create()
        defer { cluster.destroy() }
        try await cluster.start()
        try await Outage.withBroker(cluster, extra: ["BROKER_REQUEST_TIMEOUT": "3", "BROKER_DB_STATEMENT_TIMEOUT": "2"]) { broker, _ in
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

            let before = await broker.send(.GET, "/v1/accounts/\(account)/sessions")
            let session = try #require((before.body["sessions"] as? [[String: Any]])?.first?["id"] as? String, "\(before.body)")

            await cluster.stop(mode: "fast")
            // The signed-in devices (issue 42 §3): listing and ending a session answer 503 in
            // bounded time and end nothing.
            for (method, path) in [
                (HTTPMethod.GET, "/v1/accounts/\(account)/sessions"), (.DELETE, "/v1/accounts/\(account)/sessions/\(session)"),
            ] {
                let answer = await broker.send(method, path)
                #expect(answer.status == 503, "\(method) \(path): \(answer.body)")
                #expect(answer.retryAfter != nil)
                #expect(answer.seconds < Outage.answerBound)
            }
            let down = await linkIt()
            print("link with PostgreSQL down: \(down.status) \(down.body["code"] ?? "-") in \(down.seconds) s")
            #expect(down.status == 503)
            #expect(down.body["code"] as? String == "database_unavailable" || down.body["code"] as? String == "request_timeout")
            #expect(down.retryAfter != nil)
            #expect(down.seconds < Outage.answerBound)

            try await cluster.start()
            var linked = await linkIt()
            let deadline = ContinuousClock.now + .seconds(10)
            while linked.status == 503, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
                linked = await linkIt()
            }
            #expect(linked.status == 201, "\(linked.body)")
            let listed = await broker.send(.GET, "/v1/accounts/\(account)/sessions")
            #expect((listed.body["sessions"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [session], "still open")
            // The link spent its proof (decision 0032): a retry with the same token is refused and
            // changes nothing; a retry with a fresh token would be the 200 no-op.
            let retried = await linkIt()
            #expect(retried.status == 401 && retried.body["code"] as? String == "token_replayed", "\(retried.body)")

            try await Outage.withClient(cluster) { client in
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

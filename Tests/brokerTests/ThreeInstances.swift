import Foundation
import NIOHTTP1
import Storage
import Testing
import TestSupport

/// Three `broker serve` processes on one database, and what every multi-instance suite checks
/// of them (`SeveralInstancesTests`, `PoolerTests`): a refresh raced over the three, a revoked
/// key refused by all, every event delivered once.
final class ThreeInstances: Sendable {
    let servers: [ProcessRunner.Running]
    /// Their base URLs, `http://127.0.0.1:PORT`.
    let bases: [String]

    /// Spawns three `serve` of `cli` (each on its own port; connections per address raised for
    /// the hundreds of requests at once the suites send) and waits until each is ready.
    init(_ cli: BrokerCLI) async throws {
        var servers: [ProcessRunner.Running] = []
        var bases: [String] = []
        var readinesses: [ReadinessSocket] = []
        do {
            for _ in 0..<3 {
                let port = TestPorts.next()
                var instance = cli
                instance.environment["BROKER_PORT"] = "\(port)"
                instance.environment["BROKER_HTTP_MAX_CONNECTIONS_PER_IP"] = "512"
                let readiness = try ReadinessSocket.open()
                readinesses.append(readiness)
                servers.append(try readiness.notifying(instance).spawn(["serve"]))
                bases.append("http://127.0.0.1:\(port)")
            }
            for (index, base) in bases.enumerated() {
                try await readinesses[index].awaitReady(servers[index], base: base)
            }
        } catch {
            Self.kill(servers)
            throw error
        }
        self.servers = servers
        self.bases = bases
    }

    /// Ends the three (call it when done; a suite's `defer`).
    func stop() { Self.kill(servers) }

    private static func kill(_ servers: [ProcessRunner.Running]) {
        for server in servers {
            server.signal(SIGKILL)
            _ = try? ProcessRunner.wait(server)
        }
    }

    /// One refresh token presented six times at once over the three: every caller gets the
    /// same successor. The answers, `(status, refresh token, access token)`.
    func raceRefresh(_ refresh: String, key: String?) async -> [(Int, String?, String?)] {
        let bases = bases
        let answers = await withTaskGroup(of: (Int, String?, String?).self) { group in
            for index in 0..<6 {
                group.addTask {
                    let answer = await ServedHTTP.send(
                        .POST, "\(bases[index % 3])/v1/sessions/refresh", key: key, json: #"{"refresh_token":"\#(refresh)"}"#)
                    return (answer.status, answer.body["refresh_token"] as? String, answer.body["access_token"] as? String)
                }
            }
            var answers: [(Int, String?, String?)] = []
            for await answer in group { answers.append(answer) }
            return answers
        }
        #expect(answers.allSatisfy { $0.0 == 200 }, "\(answers.map(\.0))")
        #expect(Set(answers.compactMap(\.1)).count == 1, "the same successor for every caller")
        return answers
    }

    /// A key made and revoked through `cli` is refused by all three within a second of the
    /// revocation (the cache invalidations reach each).
    func expectRevokedKeyRefusedEverywhere(_ cli: BrokerCLI, tenant: String) async throws {
        let made = try await cli.run("api-key", "create", "--tenant", tenant, "--json").object()
        let key = try #require(made["key"] as? String)
        let id = try #require(made["id"] as? String)
        for base in bases {
            #expect(await ServedHTTP.send(.GET, "\(base)/v1/tenant", key: key).status == 200, "cached on each")
        }
        #expect(try await cli.run("api-key", "revoke", "--tenant", tenant, id).status == 0)
        let revokedAt = ContinuousClock.now
        for (index, base) in bases.enumerated() {
            let refused = try await ServedHTTP.within(.seconds(5)) {
                await ServedHTTP.send(.GET, "\(base)/v1/tenant", key: key).status == 401
            }
            #expect(refused != nil, "instance \(index) still takes the revoked key")
            print("FIGURE instances: instance \(index) refused the revoked key \(ContinuousClock.now - revokedAt) after the revocation")
        }
        #expect(ContinuousClock.now - revokedAt < .seconds(1), "refused everywhere within a second of the revocation")
    }

    /// `events` events reach `sink` once each, whichever instance's worker took them.
    func expectEveryEventDeliveredOnce(_ events: Int, to sink: WebhookSink) async throws {
        let delivered = try await ServedHTTP.within(.seconds(60)) { sink.deliveries.count >= events }
        // What the instances said of their deliveries, should one be missing.
        let said = servers.enumerated().flatMap { index, server in
            server.output.split(separator: "\n").filter { $0.contains("webhook") }.map { "instance \(index): \($0)" }
        }
        #expect(delivered != nil, "\(sink.deliveries.count) of \(events) events delivered\n\(said.joined(separator: "\n"))")
        let ids = sink.deliveries.map(\.id)
        #expect(Set(ids).count == ids.count, "no event delivered twice")
        #expect(ids.count == events)
    }
}

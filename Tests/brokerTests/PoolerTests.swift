import Crypto
import Foundation
import Logging
import MockIdP
import NIOHTTP1
import PostgresNIO
import Storage
import Testing
import TestSupport

/// The broker behind Debian's PgBouncer (1.18) in transaction mode (issue 43, decision 0086):
/// three `broker serve` processes and the admin commands through it, each transaction on
/// whichever server connection the pooler hands out. Sign-ins, refreshes, linking, lookups
/// across two tenants, an import, the cache invalidations and the workers give the answers
/// they give on PostgreSQL directly; a broker not set up for such a pooler refuses to start.
@Suite(.tags(.load), .serialized) struct PoolerTests {
    static let teamID = "TEAM000001"
    static let keyID = "KEY0000001"

    /// What a broker needs behind a pooler in transaction mode: the scope per transaction,
    /// statements unnamed, and the work that holds a session on PostgreSQL directly.
    static func behindPooler(session: String) -> [String: String] {
        ["BROKER_DB_TENANT_SCOPE": "transaction", "BROKER_DB_PREPARED_STATEMENTS": "unnamed", "BROKER_DB_SESSION_URL": session]
    }

    static func scalar(_ database: Database, _ query: PostgresQuery) async throws -> Int {
        for try await value in try await database.client.query(query).decode(Int.self) { return value }
        return -1
    }

    static func json(_ result: BrokerCLI.Result) -> [String: Any] {
        let line = result.output.split(separator: "\n").last.map(String.init) ?? ""
        return (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] ?? [:]
    }

    @Test func aBrokerNotSetUpForAPoolerInTransactionModeRefusesToStart() async throws {
        try await TestDatabase.withFresh { _, url in
            try await PgBouncer.with(mode: "transaction") { bouncer in
                let name = TestDatabase.name(of: url)
                let pooled = bouncer.url(database: name, user: "postgres")
                func code(_ extra: [String: String]) async throws -> (Int32, String?, String) {
                    let result = try await BrokerCLI(databaseURL: pooled, extra: extra).run("tenant", "list", "--json")
                    return (result.status, (Self.json(result)["error"] as? [String: Any])?["code"] as? String, result.output)
                }
                // The default: every connection starts with settings the pooler refuses.
                let plain = try await code([:])
                #expect(plain.0 != 0 && plain.1 == "database_pooler_refused_setting", "\(plain.2)")
                // The scope per transaction, but named statements, which PgBouncer 1.18 cannot carry.
                let named = try await code(["BROKER_DB_TENANT_SCOPE": "transaction", "BROKER_DB_SESSION_URL": url])
                #expect(named.0 != 0 && named.1 == "pooler_drops_prepared_statements", "\(named.2)")
                // No session URL: LISTEN and the locks would go through the pooler.
                let noSession = try await code(["BROKER_DB_TENANT_SCOPE": "transaction", "BROKER_DB_PREPARED_STATEMENTS": "unnamed"])
                #expect(noSession.0 != 0 && noSession.1 == "pooler_needs_session_url", "\(noSession.2)")
                // A session URL through the same pooler.
                let sharedSession = try await code(Self.behindPooler(session: pooled))
                #expect(sharedSession.0 != 0 && sharedSession.1 == "pooler_session_url_shared", "\(sharedSession.2)")
                // Set up for it: it works.
                let ready = try await BrokerCLI(databaseURL: pooled, extra: Self.behindPooler(session: url)).run("tenant", "list")
                #expect(ready.status == 0, "\(ready.output)")
                // And PostgreSQL directly is not taken for a pooler.
                let direct = try await BrokerCLI(databaseURL: url).run("tenant", "list")
                #expect(direct.status == 0, "\(direct.output)")
            }
        }
    }

    /// A PgBouncer that drops the startup settings lets a broker with the default scope connect,
    /// where each statement would run under the scope another client left on the server
    /// connection (issue 43: lookups answered empty): refused before anything is served.
    @Test func theDefaultScopeIsRefusedBehindAPoolerThatLetsItConnect() async throws {
        try await TestDatabase.withFresh { _, url in
            try await PgBouncer.with(mode: "transaction", ignoringSettings: true) { bouncer in
                let pooled = bouncer.url(database: TestDatabase.name(of: url), user: "postgres")
                let plain = try await BrokerCLI(databaseURL: pooled, extra: ["BROKER_DB_SESSION_URL": url]).run("tenant", "list", "--json")
                #expect(plain.status != 0, "\(plain.output)")
                #expect(
                    (Self.json(plain)["error"] as? [String: Any])?["code"] as? String == "pooler_needs_transaction_scope", "\(plain.output)"
                )
                #expect(plain.output.contains("BROKER_DB_TENANT_SCOPE=transaction"))
            }
            // In session mode the same broker works: each client keeps its server connection.
            try await PgBouncer.with(mode: "session", ignoringSettings: true) { bouncer in
                let pooled = bouncer.url(database: TestDatabase.name(of: url), user: "postgres")
                let plain = try await BrokerCLI(databaseURL: pooled).run("tenant", "list")
                #expect(plain.status == 0, "\(plain.output)")
            }
        }
    }

    /// Instances that start together check the pooler together, and each check's prepared
    /// statement may then move to another backend between its preparation and its run
    /// (SQLSTATE 26000: one of three instances refused to start in CI on 2026-12-04). Many
    /// checks at once behind a barrier, several times: each finds the pooler, none fails.
    @Test func checksAtTheSameMomentEachFindThePooler() async throws {
        try await TestDatabase.withFresh { _, url in
            try await PgBouncer.with(mode: "transaction") { bouncer in
                var configuration = try DatabaseConfiguration(url: bouncer.url(database: TestDatabase.name(of: url), user: "postgres"))
                configuration.tenantScopePerTransaction = true
                let pooled = configuration
                for _ in 0..<8 {
                    let barrier = Barrier(count: 6)
                    let findings = try await withThrowingTaskGroup(of: PoolerFinding.self) { group in
                        for _ in 0..<6 {
                            group.addTask {
                                await barrier.arrive()
                                return try await PoolerCheck.check(pooled, logger: Logger(label: "test"))
                            }
                        }
                        return try await group.reduce(into: []) { $0.append($1) }
                    }
                    #expect(findings.count == 6)
                    for finding in findings {
                        #expect(finding.sharesServerConnections, "\(finding)")
                        #expect(finding.carriesNamedStatements != true, "\(finding)")
                    }
                }
            }
        }
    }

    @Test func threeInstancesThroughPgBouncerInTransactionMode() async throws {
        try await TestDatabase.withFresh { database, url in
            try await PgBouncer.with(mode: "transaction") { bouncer in
                try await MockAppleServer.with { apple, appleURL in
                    try await WebhookSink.with { sink in
                        try await Self.run(database, url, bouncer, apple, appleURL, sink)
                    }
                }
            }
        }
    }

    static func run(
        _ database: Database, _ url: String, _ bouncer: PgBouncer, _ apple: MockAppleIdP, _ appleURL: String, _ sink: WebhookSink
    ) async throws {
        let name = TestDatabase.name(of: url)
        let environment = ["BROKER_APPLE_BASE_URL": appleURL, "BROKER_LOG_LEVEL": "warning", "BROKER_WEBHOOK_ALLOW_INSECURE": "1"]
        // The operator's commands through the pooler too.
        let cli = BrokerCLI(
            databaseURL: bouncer.url(database: name, user: "postgres"),
            extra: environment.merging(behindPooler(session: url)) { $1 })
        let p8Key = P256.Signing.PrivateKey()
        apple.registerTeam(teamID, keyID: keyID, publicKey: p8Key.publicKey)
        let p8 = FileManager.default.temporaryDirectory.appendingPathComponent("AuthKey-\(UUID().uuidString).p8").path
        try p8Key.pemRepresentation.write(toFile: p8, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: p8) }
        var keys: [String: String] = [:]
        for slug in ["acme", "beta"] {
            #expect(try await cli.run("tenant", "create", slug).status == 0)
            keys[slug] = try #require(try await cli.run("api-key", "create", "--tenant", slug, "--json").object()["key"] as? String)
            let team = try await cli.run(
                "apple", "team", "set", "--tenant", slug, "--team-id", teamID, "--key-id", keyID, "--private-key-file", p8)
            #expect(team.status == 0, "\(team.output)")
            let group = try await cli.run(
                "apple", "group", "add", "--tenant", slug, "--primary-app-id", "com.\(slug).app", "--no-nonce-required")
            #expect(group.status == 0, "\(group.output)")
        }
        #expect(try await cli.run("webhook", "set", "--tenant", "acme", "--url", sink.url).status == 0)

        // An import through the pooler: 300 people of acme with an Apple identity each.
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("import-\(UUID().uuidString).jsonl").path
        try (0..<300).map { #"{"external_id":"ext-\#($0)","identities":[{"provider":"apple","subject":"imported.\#($0)"}]}"# }
            .joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let imported = try await cli.run(["import", "users", "--tenant", "acme", "--from", "jsonl", "--file", file, "--batch-size", "50"])
        #expect(imported.status == 0, "\(imported.output)")
        #expect(try await scalar(database, "SELECT count(*)::int FROM accounts WHERE external_id LIKE 'ext-%'") == 300)

        // Three instances through the pooler, as the role that serves, with one public URL, as
        // behind a load balancer: the tokens one issues are the tokens of the others (their issuer).
        let publicPort = TestPorts.next()
        let instances = try await ThreeInstances(
            BrokerCLI(
                databaseURL: bouncer.url(database: name, user: Migrator.serveRole),
                extra: environment.merging(behindPooler(session: TestDatabase.servingURL(url))) { $1 }.merging([
                    "BROKER_PUBLIC_URL": "http://127.0.0.1:\(publicPort)"
                ]) { $1 }))
        defer { instances.stop() }
        let bases3 = instances.bases
        let keys2 = keys

        // 300 sign-ins at once over the three and both tenants: 50 people signing in three
        // times each in each tenant, and 50 imported people of acme, each on their account.
        struct Asked: Sendable {
            let tenant: String
            let subject: String
            let token: String
        }
        var asked: [Asked] = []
        for round in 0..<3 {
            for person in 0..<50 {
                for slug in ["acme", "beta"] {
                    let subject = "person.\(person)"
                    asked.append(
                        Asked(
                            tenant: slug, subject: subject,
                            token: try apple.mint(apple.claims(subject: subject, audience: "com.\(slug).app"))))
                }
                if round == 0 {
                    let subject = "imported.\(person)"
                    asked.append(
                        Asked(
                            tenant: "acme", subject: subject,
                            token: try apple.mint(apple.claims(subject: subject, audience: "com.acme.app"))))
                }
            }
        }
        let asked2 = asked
        let answers = await withTaskGroup(of: (Int, Asked, String?, Bool?, String?).self) { group in
            for (index, ask) in asked2.enumerated() {
                group.addTask {
                    let answer = await ServedHTTP.send(
                        .POST, "\(bases3[index % 3])/v1/sign-in/apple", key: keys2[ask.tenant],
                        json: #"{"client_id":"com.\#(ask.tenant).app","identity_token":"\#(ask.token)"}"#)
                    let account = answer.body["account"] as? [String: Any]
                    return (
                        answer.status, ask, account?["id"] as? String, answer.body["is_new_account"] as? Bool,
                        account?["external_id"] as? String
                    )
                }
            }
            var answers: [(Int, Asked, String?, Bool?, String?)] = []
            for await answer in group { answers.append(answer) }
            return answers
        }
        #expect(answers.allSatisfy { $0.0 == 200 }, "\(Dictionary(grouping: answers, by: \.0).mapValues(\.count))")
        let byPerson = Dictionary(grouping: answers) { "\($0.1.tenant)/\($0.1.subject)" }.mapValues { Set($0.compactMap(\.2)) }
        #expect(byPerson.count == 150 && byPerson.values.allSatisfy { $0.count == 1 }, "one account per person and tenant")
        #expect(answers.filter { $0.1.subject.hasPrefix("imported.") }.allSatisfy { $0.3 == false }, "the imported accounts")
        #expect(try await scalar(database, "SELECT count(*)::int FROM accounts") == 300 + 50 + 50)
        #expect(try await scalar(database, "SELECT count(*)::int FROM identities WHERE subject LIKE 'person.%'") == 100)

        // Each account read back through every instance, by its own tenant's key only.
        let accounts = answers.compactMap { answer in answer.2.map { (answer.1.tenant, $0) } }
        let reads = await withTaskGroup(of: (Int, Int).self) { group in
            for (index, (slug, account)) in Set(accounts.map { "\($0.0) \($0.1)" }).map({ $0.split(separator: " ").map(String.init) })
                .map({ ($0[0], $0[1]) }).enumerated()
            {
                group.addTask {
                    let own = await ServedHTTP.send(.GET, "\(bases3[index % 3])/v1/accounts/\(account)", key: keys2[slug])
                    let other = await ServedHTTP.send(
                        .GET, "\(bases3[(index + 1) % 3])/v1/accounts/\(account)", key: keys2[slug == "acme" ? "beta" : "acme"])
                    return (own.status, other.status)
                }
            }
            var reads: [(Int, Int)] = []
            for await read in group { reads.append(read) }
            return reads
        }
        #expect(reads.count == 150)
        #expect(reads.allSatisfy { $0 == (200, 404) }, "\(reads.filter { $0 != (200, 404) }.count) reads answered otherwise")
        // The imported people by external id.
        for index in [0, 7, 299] {
            let found = await ServedHTTP.send(.GET, "\(bases3[index % 3])/v1/accounts?external_id=ext-\(index)", key: keys["acme"])
            #expect(found.status == 200 && (found.body["accounts"] as? [[String: Any]])?.count == 1, "ext-\(index): \(found.body)")
        }

        // One refresh token presented to all three at once: one successor pair for all.
        let session = await ServedHTTP.send(
            .POST, "\(bases3[0])/v1/sign-in/apple", key: keys["acme"],
            json:
                #"{"client_id":"com.acme.app","identity_token":"\#(try apple.mint(apple.claims(subject: "refresh.person", audience: "com.acme.app")))"}"#
        )
        let refresh = try #require((session.body["session"] as? [String: Any])?["refresh_token"] as? String)
        let successors = await instances.raceRefresh(refresh, key: keys["acme"])

        // Linking: a second Apple identity linked to the refresh person's account, with the access
        // token of the session's rotation.
        let accessToken = try #require(successors.compactMap(\.2).first, "the rotation's access token")
        let accountID = try #require((session.body["account"] as? [String: Any])?["id"] as? String)
        let linked = await ServedHTTP.send(
            .POST, "\(bases3[1])/v1/accounts/\(accountID)/identities", key: keys["acme"],
            headers: ["X-Account-Token": accessToken],
            json:
                #"{"provider":"apple","client_id":"com.acme.app","identity_token":"\#(try apple.mint(apple.claims(subject: "linked.person", audience: "com.acme.app")))"}"#
        )
        #expect(linked.status == 200 || linked.status == 201, "\(linked.body)")
        let viaLinked = await ServedHTTP.send(
            .POST, "\(bases3[2])/v1/sign-in/apple", key: keys["acme"],
            json:
                #"{"client_id":"com.acme.app","identity_token":"\#(try apple.mint(apple.claims(subject: "linked.person", audience: "com.acme.app")))"}"#
        )
        #expect((viaLinked.body["account"] as? [String: Any])?["id"] as? String == accountID, "\(viaLinked.body)")

        // A key revoked through the CLI is refused by all three within a second: the cache
        // invalidations arrive over the session URL's LISTEN.
        try await instances.expectRevokedKeyRefusedEverywhere(cli, tenant: "acme")

        // The workers: every event of acme reaches the webhook once, whichever instance took it.
        let events = try await scalar(
            database, "SELECT count(*)::int FROM events_outbox WHERE tenant_id = (SELECT id FROM tenants WHERE slug = 'acme')")
        #expect(events >= 52, "account.created for 50 people and more")
        try await instances.expectEveryEventDeliveredOnce(events, to: sink)
        // Nothing in the instances' logs of a failed statement.
        for (index, server) in instances.servers.enumerated() {
            #expect(!server.output.contains("internal_error"), "instance \(index): \(server.output.suffix(2000))")
        }
    }
}

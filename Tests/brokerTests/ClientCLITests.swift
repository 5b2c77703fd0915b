import Crypto
import Foundation
import PostgresNIO
import Storage
import TestSupport
import Testing

/// `broker client create|list|show|remove|rotate-secret` (issue 42 §1, decision 0081): a
/// confidential client's secret printed once and stored only as its SHA-256, a public client
/// without one, redirect URIs checked before anything is stored, each tenant's clients its own,
/// every change audited.
@Suite struct ClientCLITests {
    static func storedHash(_ database: Database, _ clientID: String) async throws -> Data? {
        for try await hash in try await database.client.query(
            "SELECT secret_hash FROM oauth_clients WHERE client_id = \(clientID)"
        ).decode(Data?.self) { return hash }
        return nil
    }

    static func count(_ database: Database) async throws -> Int {
        for try await value in try await database.client.query("SELECT count(*)::int FROM oauth_clients").decode(Int.self) {
            return value
        }
        return -1
    }

    @Test func aConfidentialClientsSecretIsPrintedOnceAndStoredAsItsHash() async throws {
        try await TestDatabase.withFresh { database, url in
            let cli = BrokerCLI(databaseURL: url)
            #expect(try await cli.run("tenant", "create", "acme").status == 0)
            let created = try await cli.run(
                "client", "create", "--tenant", "acme", "--name", "web", "--redirect-uri", "https://app.example.com/callback",
                "--redirect-uri", "https://app.example.com/callback", "--post-logout-redirect-uri", "https://app.example.com/bye",
                "--json")
            #expect(created.status == 0, "\(created.output)")
            let object = try created.object()
            let clientID = try #require(object["client_id"] as? String)
            let secret = try #require(object["client_secret"] as? String)
            #expect(clientID.hasPrefix("ibc_") && secret.hasPrefix("ibcs_"))
            #expect(object["type"] as? String == "confidential")
            #expect(object["redirect_uris"] as? [String] == ["https://app.example.com/callback"], "a repeat is kept once")
            #expect(object["post_logout_redirect_uris"] as? [String] == ["https://app.example.com/bye"])
            #expect(try await Self.storedHash(database, clientID) == Data(SHA256.hash(data: Data(secret.utf8))))

            // Never shown again: not by show, list or the audit log.
            let shown = try await cli.run("client", "show", "--tenant", "acme", clientID, "--json")
            #expect(shown.status == 0 && !shown.output.contains(secret) && shown.output.contains(clientID))
            #expect(try shown.object()["client_secret"] == nil)
            let listed = try await cli.run("client", "list", "--tenant", "acme", "--json")
            #expect(try listed.array().map { $0["client_id"] as? String } == [clientID])
            #expect(!listed.output.contains(secret))
            let text = try await cli.run("client", "show", "--tenant", "acme", clientID)
            #expect(text.output.contains("redirect uri:              https://app.example.com/callback"), "\(text.output)")

            // A new secret replaces the old one's hash.
            let rotated = try await cli.run("client", "rotate-secret", "--tenant", "acme", clientID, "--json").object()
            let newSecret = try #require(rotated["client_secret"] as? String)
            #expect(newSecret != secret && rotated["secret_rotated_at"] is String)
            #expect(try await Self.storedHash(database, clientID) == Data(SHA256.hash(data: Data(newSecret.utf8))))

            // Removed: gone, audited.
            #expect(try await cli.run("client", "remove", "--tenant", "acme", clientID).status == 0)
            let again = try await cli.run("client", "show", "--tenant", "acme", clientID, "--json")
            #expect(again.status == 1)
            #expect((try again.object()["error"] as? [String: Any])?["code"] as? String == "client_not_found")
            let actions = try await cli.run("audit", "list", "--tenant", "acme", "--json").array().compactMap { $0["action"] as? String }
            for action in ["client.create", "client.rotate_secret", "client.remove"] { #expect(actions.contains(action), "\(actions)") }
            let audit = try await cli.run("audit", "list", "--tenant", "acme", "--json")
            #expect(!audit.output.contains(secret) && !audit.output.contains(newSecret))
        }
    }

    @Test func aPublicClientHasNoSecretAndMayUseLoopbackAndItsOwnScheme() async throws {
        try await TestDatabase.withFresh { database, url in
            let cli = BrokerCLI(databaseURL: url)
            #expect(try await cli.run("tenant", "create", "acme").status == 0)
            let created = try await cli.run(
                "client", "create", "--tenant", "acme", "--name", "ios", "--public", "--allow-loopback", "--redirect-uri",
                "com.acme.app:/oauth2redirect", "--redirect-uri", "http://127.0.0.1:8400/callback", "--json")
            #expect(created.status == 0, "\(created.output)")
            let object = try created.object()
            let clientID = try #require(object["client_id"] as? String)
            #expect(object["type"] as? String == "public" && object["client_secret"] == nil && object["allow_loopback"] as? Bool == true)
            #expect(try await Self.storedHash(database, clientID) == nil)
            let rotated = try await cli.run("client", "rotate-secret", "--tenant", "acme", clientID, "--json")
            #expect(rotated.status == 1)
            #expect((try rotated.object()["error"] as? [String: Any])?["code"] as? String == "client_is_public")
            #expect(try await Self.storedHash(database, clientID) == nil, "still no secret")
        }
    }

    /// Each refused registration says why and stores nothing.
    @Test func aRedirectURIThatCannotBeRegisteredIsRefusedAndNothingIsStored() async throws {
        try await TestDatabase.withFresh { database, url in
            let cli = BrokerCLI(databaseURL: url)
            #expect(try await cli.run("tenant", "create", "acme").status == 0)
            let cases: [([String], String)] = [
                (["--redirect-uri", "http://app.example.com/cb"], "http is allowed only on a loopback address"),
                (["--redirect-uri", "http://127.0.0.1:8080/cb"], "needs --allow-loopback"),
                (["--redirect-uri", "https://app.example.com/cb#x"], "fragment"),
                (["--redirect-uri", "com.acme.app:/cb"], "confidential client's redirect URI"),
                ([], "Give at least one --redirect-uri"),
                (
                    ["--redirect-uri", "https://app.example.com/cb", "--post-logout-redirect-uri", "ftp://x"],
                    "confidential client's redirect URI"
                ),
            ]
            for (arguments, reason) in cases {
                let result = try await cli.run(["client", "create", "--tenant", "acme", "--name", "web"] + arguments)
                #expect(result.status == 1, "\(arguments)")
                #expect(result.output.contains(reason), "\(arguments): \(result.output)")
            }
            let badName = try await cli.run(
                "client", "create", "--tenant", "acme", "--name", "web\u{1B}[2J", "--redirect-uri", "https://app.example.com/cb")
            #expect(badName.status == 1)
            #expect(try await Self.count(database) == 0)
            #expect(
                try await cli.run("audit", "list", "--tenant", "acme", "--json").array().contains {
                    ($0["action"] as? String)?.hasPrefix("client.") == true
                } == false)
        }
    }

    @Test func aTenantSeesOnlyItsOwnClients() async throws {
        try await TestDatabase.withFresh { _, url in
            let cli = BrokerCLI(databaseURL: url)
            for slug in ["acme", "bravo"] { #expect(try await cli.run("tenant", "create", slug).status == 0) }
            let created = try await cli.run(
                "client", "create", "--tenant", "acme", "--name", "web", "--redirect-uri", "https://app.example.com/cb", "--json")
            let clientID = try #require(try created.object()["client_id"] as? String)
            for command in ["show", "remove", "rotate-secret"] {
                let other = try await cli.run("client", command, "--tenant", "bravo", clientID, "--json")
                #expect(other.status == 1, "\(command)")
                #expect((try other.object()["error"] as? [String: Any])?["code"] as? String == "client_not_found", "\(command)")
            }
            #expect(try await cli.run("client", "list", "--tenant", "bravo", "--json").array().isEmpty)
            #expect(try await cli.run("client", "show", "--tenant", "acme", clientID).status == 0, "still acme's")
            let malformed = try await cli.run("client", "show", "--tenant", "acme", "not-a-client")
            #expect(malformed.status == 1 && malformed.output.contains("is not a client id"), "\(malformed.output)")
        }
    }
}

/// A database that refuses connections: `client create` fails within the connect timeout,
/// naming the cause, and no secret is made or printed.
@Suite struct ClientCLIDatabaseDownTests {
    @Test func aRefusingDatabaseIsNamedAndNoSecretIsPrinted() throws {
        let refusing = try HeldPort(listening: false)
        defer { refusing.close() }
        let cli = BrokerCLI(
            databaseURL: "postgres://postgres@127.0.0.1:\(refusing.port)/postgres?sslmode=disable",
            extra: ["BROKER_DB_CONNECT_TIMEOUT": "3"])
        let created = try cli.run(
            "client", "create", "--tenant", "acme", "--name", "web", "--redirect-uri", "https://app.example.com/cb", "--json")
        #expect(created.status == 1)
        #expect((try created.object()["error"] as? [String: Any])?["code"] as? String == "database_unreachable", "\(created.output)")
        #expect(!created.output.contains("ibcs_") && !created.output.contains("client_secret"))
        let text = try cli.run("client", "list", "--tenant", "acme")
        #expect(text.status == 1 && text.output.contains("Connection refused at 127.0.0.1:\(refusing.port)"), "\(text.output)")
    }
}

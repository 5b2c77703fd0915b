import Foundation
import Storage
import Testing
import TestSupport

/// Admin commands and `broker serve` against a database they cannot use fail within
/// `BROKER_DB_CONNECT_TIMEOUT` and name the cause with a hint (decision 0032). Before, they
/// waited 67 s on the pool's circuit breaker and printed an opaque `ConnectionPoolError`.
@Suite struct DatabaseConnectFailureCLITests {
    /// Runs `arguments` against `url` and returns the result and how long it took.
    static func run(_ url: String, _ arguments: String..., timeout: Int = 3) throws -> (BrokerCLI.Result, Double) {
        let cli = BrokerCLI(databaseURL: url, extra: ["BROKER_DB_CONNECT_TIMEOUT": "\(timeout)"])
        let start = ContinuousClock.now
        let result = try cli.run(arguments)
        return (result, (ContinuousClock.now - start).seconds)
    }

    static func errorCode(_ output: String) -> String? {
        for line in output.split(separator: "\n") {
            if let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let error = object["error"] as? [String: Any]
            {
                return error["code"] as? String
            }
        }
        return nil
    }

    @Test func connectionRefusedNamesHostAndPort() async throws {
        let refusing = try HeldPort(listening: false)
        defer { refusing.close() }
        let port = refusing.port
        let url = "postgres://postgres@127.0.0.1:\(port)/postgres?sslmode=disable"
        let (text, seconds) = try Self.run(url, "tenant", "list")
        #expect(text.status == 1)
        #expect(text.output.contains("error: Connection refused at 127.0.0.1:\(port)"), "\(text.output)")
        #expect(text.output.contains("hint: Start PostgreSQL"), "\(text.output)")
        #expect(!text.output.contains("ConnectionPoolError"))
        #expect(seconds < 3 + 5)
        let (json, _) = try Self.run(url, "db", "status", "--json")
        #expect(json.status == 1)
        #expect(Self.errorCode(json.output) == "database_unreachable", "\(json.output)")
    }

    @Test func noSuchDatabaseIsNamed() throws {
        let cluster = try TestDatabase.clusterURL()
        let url = cluster.replacingOccurrences(of: "///postgres?", with: "///no_such_database_here?")
        let (result, seconds) = try Self.run(url, "api-key", "list", "--tenant", "acme")
        #expect(result.status == 1)
        #expect(result.output.contains("has no database 'no_such_database_here'"), "\(result.output)")
        #expect(result.output.contains("hint: Create it"), "\(result.output)")
        #expect(seconds < 3 + 5)
    }

    /// A port that takes TCP connections (into its listen backlog) and never answers: the wait
    /// ends at the timeout.
    @Test func noAnswerEndsAtTheConnectTimeout() async throws {
        let silent = try HeldPort()
        defer { silent.close() }
        let port = silent.port
        let (result, seconds) = try Self.run("postgres://postgres@127.0.0.1:\(port)/postgres?sslmode=disable", "tenant", "list", timeout: 2)
        #expect(result.status == 1)
        #expect(result.output.contains("No answer from PostgreSQL at 127.0.0.1:\(port) within 2 s"), "\(result.output)")
        #expect(seconds < 2 + 4, "took \(seconds) s")
    }

    @Test func serveFailsWithinTheTimeoutNamingTheCause() async throws {
        let refusing = try HeldPort(listening: false)
        defer { refusing.close() }
        let port = refusing.port
        let (result, seconds) = try Self.run("postgres://postgres@127.0.0.1:\(port)/postgres?sslmode=disable", "serve", "--no-migrate")
        #expect(result.status == 1)
        #expect(result.output.contains("Connection refused at 127.0.0.1:\(port)"), "\(result.output)")
        #expect(seconds < 3 + 5)
    }

    /// A cluster that takes TCP with TLS and a password only: a wrong password, and TLS turned
    /// off, are each named.
    @Test func authenticationAndTLSRequiredAreNamed() async throws {
        let cluster = try await OwnCluster.create()
        defer { cluster.destroy() }
        let data = "\(cluster.directory)/data"
        let key = try ProcessRunner.run(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                "-keyout", "\(data)/server.key", "-out", "\(data)/server.crt",
            ])
        try #require(key.status == 0, "\(key.output)")
        try "local all all trust\nhostssl all all 127.0.0.1/32 scram-sha-256\n".write(
            toFile: "\(data)/pg_hba.conf", atomically: true, encoding: .utf8)
        try "ssl = on\npassword_encryption = 'scram-sha-256'\n".write(toFile: "\(data)/conf.d.ssl.conf", atomically: true, encoding: .utf8)
        let conf = try String(contentsOfFile: "\(data)/postgresql.conf", encoding: .utf8)
        try (conf + "\ninclude = 'conf.d.ssl.conf'\n").write(toFile: "\(data)/postgresql.conf", atomically: true, encoding: .utf8)
        if let user = cluster.user {
            _ = try ProcessRunner.run("/bin/chown", ["-R", user, data])
        }
        _ = try ProcessRunner.run("/bin/chmod", ["600", "\(data)/server.key"])
        try await cluster.start(listen: "127.0.0.1")
        let setPassword = try ProcessRunner.run(
            "\(cluster.bin)/psql",
            ["-h", cluster.directory, "-p", "\(cluster.port)", "-U", "postgres", "-c", "ALTER USER postgres PASSWORD 'right-password'"],
            as: cluster.user)
        try #require(setPassword.status == 0, "\(setPassword.output)")

        let base = "postgres://postgres:%@127.0.0.1:\(cluster.port)/postgres"
        let (wrong, _) = try Self.run(base.replacingOccurrences(of: "%", with: "wrong-password") + "?sslmode=require", "tenant", "list")
        #expect(wrong.status == 1)
        #expect(wrong.output.contains("refused user 'postgres': authentication failed"), "\(wrong.output)")
        let (plain, _) = try Self.run(base.replacingOccurrences(of: "%", with: "right-password") + "?sslmode=disable", "tenant", "list")
        #expect(plain.status == 1)
        #expect(plain.output.contains("accepts only TLS connections"), "\(plain.output)")
        #expect(plain.output.contains("sslmode=require"), "\(plain.output)")
        let (right, _) = try Self.run(base.replacingOccurrences(of: "%", with: "right-password") + "?sslmode=require", "db", "status")
        #expect(right.status == 0, "\(right.output)")
    }
}

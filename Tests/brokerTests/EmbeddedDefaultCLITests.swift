import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import Foundation
import Storage
import TestSupport
import Testing

/// `broker` with no DATABASE_URL: its own PostgreSQL in BROKER_DATA_DIR.
@Suite(.serialized) struct EmbeddedDefaultCLITests {
    func dataDirectory() throws -> String {
        let path = "/tmp/ib-cli-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    func clusterRunning(_ directory: String) -> Bool {
        FileManager.default.fileExists(atPath: directory + "/postgres/postmaster.pid")
    }

    @Test func adminCommandsStartStopAndReuseTheEmbeddedCluster() throws {
        let directory = try dataDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cli = BrokerCLI(databaseURL: nil, dataDirectory: directory)

        let created = try cli.run("tenant", "create", "demo")
        #expect(created.status == 0, "\(created.output)")
        #expect(!clusterRunning(directory), "the cluster stops when its last user exits")

        let attributes = try FileManager.default.attributesOfItem(atPath: directory + "/master.key")
        #expect((attributes[.posixPermissions] as? Int) == 0o600)

        // Restart keeps data.
        let listed = try cli.run("tenant", "list", "--json")
        #expect(try listed.array().map { $0["slug"] as? String } == ["demo"])
    }

    /// PostgreSQL's own variables in the caller's environment do not move the embedded
    /// cluster (issue 39 F20: with PGPORT=6543 it listened on `.s.PGSQL.6543` and the broker
    /// dialled 5432).
    @Test func postgresVariablesOfTheCallerDoNotMoveTheEmbeddedCluster() throws {
        let directory = try dataDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cli = BrokerCLI(
            databaseURL: nil, dataDirectory: directory,
            extra: ["PGPORT": "6543", "PGHOST": "/nonexistent", "PGDATA": "/nonexistent", "PGUSER": "nobody", "PGDATABASE": "nowhere"])
        let created = try cli.run("tenant", "create", "pgvars")
        #expect(created.status == 0, "\(created.output)")
        let listed = try cli.run("tenant", "list", "--json")
        #expect(try listed.array().map { $0["slug"] as? String } == ["pgvars"], "\(listed.output)")
    }

    @Test func serveAndAdminCommandsShareTheClusterAtOnce() async throws {
        let directory = try dataDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // Ready once Apple's keys are fetched: a MockIdP plays Apple.
        try await MockAppleServer.with { _, appleURL in try await serveAndAdminCommandsShareTheClusterAtOnce(directory, appleURL) }
    }

    func serveAndAdminCommandsShareTheClusterAtOnce(_ directory: String, _ appleURL: String) async throws {
        let port = TestPorts.next()
        let cli = BrokerCLI(
            databaseURL: nil, dataDirectory: directory, extra: ["BROKER_PORT": "\(port)", "BROKER_APPLE_BASE_URL": appleURL])
        let readiness = try ReadinessSocket.open()
        let server = try readiness.notifying(cli).spawn(["serve"])
        defer {
            server.signal(SIGKILL)
            _ = try? ProcessRunner.wait(server)
        }
        let base = "http://127.0.0.1:\(port)"
        try await readiness.awaitReady(server, base: base)

        // While the server runs, an admin command in the same folder works...
        #expect(try await cli.run("tenant", "create", "demo").status == 0)
        let key = try await cli.run("api-key", "create", "--tenant", "demo", "--json").object()["key"] as? String ?? ""
        // ...and leaves the cluster running for the server.
        #expect(clusterRunning(directory))
        let response = try await HTTPClient.shared.get(url: "\(base)/v1/tenant", headers: ["Authorization": "Bearer \(key)"])
        #expect(response.status == .ok)

        // SIGTERM: graceful shutdown, and the cluster stops with the last user.
        server.signal(SIGTERM)
        let exit = try await onOwnThread { try ProcessRunner.wait(server) }
        #expect(exit.status == 0, "\(exit.output.suffix(2_000))")
        #expect(!clusterRunning(directory))
        // It served as the role the tenant wall applies to, which the migration created
        // (it warns when its role bypasses the wall).
        #expect(!exit.output.contains("bypasses row-level security"), "\(exit.output.suffix(2_000))")
    }

    @Test func serveWithDatabaseURLServesKeysCreatedByTheCLI() async throws {
        try await MockAppleServer.with { _, appleURL in try await serveWithDatabaseURL(appleURL) }
    }

    func serveWithDatabaseURL(_ appleURL: String) async throws {
        try await TestDatabase.withFresh { _, url in
            let port = TestPorts.next()
            let cli = BrokerCLI(
                databaseURL: url,
                extra: ["BROKER_PORT": "\(port)", "BROKER_PUBLIC_URL": "https://id.example.com", "BROKER_APPLE_BASE_URL": appleURL])
            #expect(try await cli.run("tenant", "create", "acme").status == 0)
            let key = try await cli.run("api-key", "create", "--tenant", "acme", "--json").object()["key"] as? String ?? ""
            let readiness = try ReadinessSocket.open()
            let server = try readiness.notifying(cli).spawn(["serve"])
            defer {
                server.signal(SIGTERM)
                _ = try? ProcessRunner.wait(server)
            }
            let base = "http://127.0.0.1:\(port)"
            try await readiness.awaitReady(server, base: base)
            let tenant = try await HTTPClient.shared.get(url: "\(base)/v1/tenant", headers: ["Authorization": "Bearer \(key)"])
            #expect(tenant.status == .ok)
            let metadata = try await HTTPClient.shared.get(url: "\(base)/t/acme/.well-known/openid-configuration")
            #expect(metadata.body.contains("\"issuer\":\"https://id.example.com/t/acme\""))
        }
    }
}

extension HTTPClient {
    struct SimpleResponse {
        let status: HTTPResponseStatus
        let body: String
    }

    func get(url: String, headers: [String: String] = [:]) async throws -> SimpleResponse {
        var request = HTTPClientRequest(url: url)
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        let response = try await execute(request, timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 1 << 20)
        return SimpleResponse(status: response.status, body: String(buffer: body))
    }
}

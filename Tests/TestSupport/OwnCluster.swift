import Foundation
import Storage

/// A PostgreSQL cluster of a test's own, for tests that stop it (the shared test cluster must stay up). `pg_ctl`
/// and `initdb` are waited on off the cooperative pool (``onOwnThread(_:)``): a load runs
/// beside them, and its answers are timed.
public struct OwnCluster: Sendable {
    public let directory: String
    public let port: Int
    public let bin: String
    public var user: String? { getuid() == 0 ? "postgres" : nil }
    public var url: String { "postgres:///postgres?host=\(directory)&port=\(port)&user=postgres" }

    public static func create() async throws -> OwnCluster {
        try await onOwnThread { try createBlocking() }
    }

    private static func createBlocking() throws -> OwnCluster {
        guard let bin = ProcessInfo.processInfo.environment["BROKER_POSTGRES_BIN"] else {
            throw ClusterFailed(output: "BROKER_POSTGRES_BIN is not set: run the tests with scripts/test.sh")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ib-outage-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let cluster = OwnCluster(directory: directory, port: Int.random(in: 20_000...30_000), bin: bin)
        if let user = cluster.user { _ = try ProcessRunner.run("/bin/chown", [user, directory]) }
        let initdb = try ProcessRunner.run(
            "\(bin)/initdb", ["-D", "\(directory)/data", "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-instructions"],
            as: cluster.user)
        guard initdb.status == 0 else { throw ClusterFailed(output: initdb.output) }
        return cluster
    }

    /// `listen`: TCP addresses to listen on besides the socket (none by default).
    public func start(listen: String = "") async throws {
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
    @discardableResult public func stop(mode: String = "fast") async -> String {
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
    public func destroy() {
        _ = stopBlocking(mode: "immediate")
        try? FileManager.default.removeItem(atPath: directory)
    }
}

public struct ClusterFailed: Error, CustomStringConvertible {
    public let output: String
    public var description: String { "PostgreSQL: \(output)" }
}

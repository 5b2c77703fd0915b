import Foundation
import Logging
import PostgresNIO
import Storage

/// Debian's PgBouncer (`BROKER_PGBOUNCER`, set by scripts/test.sh; else `/usr/sbin/pgbouncer`)
/// in front of the test cluster, on a loopback port, for as long as a body runs. As root it
/// runs as `postgres` (PgBouncer refuses root).
public struct PgBouncer: Sendable {
    /// Where it listens.
    public let port: Int

    /// A URL through it to database `name` as `user`, with the settings a broker behind it needs
    /// (none here: the caller adds them).
    public func url(database name: String, user: String) -> String {
        "postgres://\(user)@127.0.0.1:\(port)/\(name)?sslmode=disable"
    }

    public struct Missing: Error, CustomStringConvertible {
        public var description: String { "PgBouncer not found: scripts/test.sh installs Debian's pgbouncer package" }
    }

    public struct NotStarted: Error, CustomStringConvertible {
        public let output: String
        public var description: String { "PgBouncer did not start: \(output)" }
    }

    /// Runs `body` with a PgBouncer in `mode` (`transaction` or `session`) in front of the test
    /// cluster, `poolSize` server connections per database and user. `ignoringSettings`: it
    /// drops the startup parameters a broker's connection starts with instead of refusing them
    /// (`ignore_startup_parameters`), as an operator may set it up.
    public static func with<T: Sendable>(
        mode: String, poolSize: Int = 4, ignoringSettings: Bool = false, _ body: @Sendable (PgBouncer) async throws -> T
    ) async throws -> T {
        let executable = ProcessInfo.processInfo.environment["BROKER_PGBOUNCER"] ?? "/usr/sbin/pgbouncer"
        guard FileManager.default.isExecutableFile(atPath: executable) else { throw Missing() }
        let cluster = try DatabaseConfiguration(url: try TestDatabase.clusterURL())
        guard case .unixSocket(let socket) = cluster.endpoint else { throw Missing() }
        let socketDirectory = URL(fileURLWithPath: socket).deletingLastPathComponent().path
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pgbouncer-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o777])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let port = TestPorts.next()
        let configuration = """
            [databases]
            * = host=\(socketDirectory)
            [pgbouncer]
            listen_addr = 127.0.0.1
            listen_port = \(port)
            unix_socket_dir =
            auth_type = trust
            auth_file = \(folder)/users.txt
            pool_mode = \(mode)
            default_pool_size = \(poolSize)
            max_client_conn = 1000
            pidfile = \(folder)/pgbouncer.pid
            logfile = \(folder)/pgbouncer.log
            \(ignoringSettings ? "ignore_startup_parameters = statement_timeout,jit,plan_cache_mode" : "")
            """
        try configuration.write(toFile: folder + "/pgbouncer.ini", atomically: true, encoding: .utf8)
        try "\"postgres\" \"\"\n\"broker_serve\" \"\"\n".write(toFile: folder + "/users.txt", atomically: true, encoding: .utf8)
        for file in ["pgbouncer.ini", "users.txt"] {
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: folder + "/" + file)
        }
        let running = try ProcessRunner.spawn(
            executable, [folder + "/pgbouncer.ini"], as: getuid() == 0 ? "postgres" : nil, outputPath: folder + "/out.txt")
        defer {
            // The pid file's pid is PgBouncer's own (under runuser, the spawned pid is runuser's).
            if let text = try? String(contentsOfFile: folder + "/pgbouncer.pid", encoding: .utf8),
                let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines))
            {
                kill(pid, SIGKILL)
            }
            running.signal(SIGKILL)
            _ = try? ProcessRunner.wait(running)
        }
        let bouncer = PgBouncer(port: port)
        let ready = try await ServedHTTP.within(.seconds(20)) {
            do {
                var quiet = Logger(label: "pgbouncer-check")
                quiet.logLevel = .critical
                let connection = try await PostgresConnection.connect(
                    configuration: .init(
                        host: "127.0.0.1", port: port, username: "postgres", password: nil, database: "postgres", tls: .disable),
                    id: 0, logger: quiet)
                try? await connection.close()
                return true
            } catch {
                return false
            }
        }
        guard ready != nil else {
            throw NotStarted(output: running.output + ((try? String(contentsOfFile: folder + "/pgbouncer.log", encoding: .utf8)) ?? ""))
        }
        return try await body(bouncer)
    }
}

import BrokerCore
import Foundation
import Storage

/// Runs the built `broker` executable (`BROKER_BIN`, set by scripts/test.sh) as an operator would.
public struct BrokerCLI: Sendable {
    public struct Result: Sendable {
        public let status: Int32
        /// stdout and stderr, interleaved.
        public let output: String

        public init(status: Int32, output: String) {
            self.status = status
            self.output = output
        }
    }

    public var environment: [String: String]
    /// The executable beside `broker` this CLI runs: `broker`, or `broker-with-test-type` (the
    /// same command line with the test-only provider type registered).
    public var program = "broker"

    /// A CLI bound to `DATABASE_URL` (or, with nil, to the embedded default in `dataDirectory`).
    public init(databaseURL: String?, dataDirectory: String? = nil, extra: [String: String] = [:]) {
        var environment: [String: String] = [
            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
            "BROKER_MASTER_KEY": TestDatabase.masterKey.base64ForTests,
            "BROKER_LOG_FORMAT": "text",
            "HOME": NSTemporaryDirectory(),
            // Tests talk only to loopback: Apple is a MockIdP a test passes in `extra`, else a
            // loopback port where nothing listens (never the real Apple).
            "BROKER_APPLE_BASE_URL": "http://127.0.0.1:9",
        ]
        if let databaseURL { environment["DATABASE_URL"] = databaseURL }
        if let dataDirectory {
            environment["BROKER_DATA_DIR"] = dataDirectory
            environment["BROKER_MASTER_KEY"] = nil
        }
        if let bin = ProcessInfo.processInfo.environment["BROKER_POSTGRES_BIN"] { environment["BROKER_POSTGRES_BIN"] = bin }
        self.environment = environment.merging(extra) { $1 }
    }

    public static func executable() throws -> String {
        guard let path = ProcessInfo.processInfo.environment["BROKER_BIN"], FileManager.default.isExecutableFile(atPath: path)
        else { throw TestDatabase.MissingCluster() }
        return path
    }

    /// ``program``, built beside `broker` (`BROKER_BIN`).
    public func executable() throws -> String {
        guard program != "broker" else { return try Self.executable() }
        let path = URL(fileURLWithPath: try Self.executable()).deletingLastPathComponent().appendingPathComponent(program).path
        guard FileManager.default.isExecutableFile(atPath: path) else { throw TestDatabase.MissingCluster() }
        return path
    }

    @discardableResult
    public func run(_ arguments: String...) throws -> Result {
        try run(arguments)
    }

    public func run(_ arguments: [String]) throws -> Result {
        let result = try ProcessRunner.run(try executable(), arguments, environment: environment(for: arguments))
        return Result(status: result.status, output: result.output)
    }

    /// Runs the command and awaits it on a thread of its own, never on one of the cooperative
    /// pool's (two on this machine). The synchronous ``run(_:)-(String...)`` holds its caller's thread
    /// until the command exits: a command that calls back into this process (OpenID Connect
    /// discovery or a key set at an in-process MockIdP) then waits for a server that needs the
    /// threads it holds, and two at once hang the whole test run.
    @discardableResult
    public func run(_ arguments: String...) async throws -> Result {
        try await run(arguments)
    }

    public func run(_ arguments: [String]) async throws -> Result {
        let running = try ProcessRunner.spawn(try executable(), arguments, environment: environment(for: arguments))
        let result = try await onOwnThread { try ProcessRunner.wait(running) }
        return Result(status: result.status, output: result.output)
    }

    /// Starts `broker serve` in the background.
    public func spawn(_ arguments: [String]) throws -> ProcessRunner.Running {
        try ProcessRunner.spawn(try executable(), arguments, environment: environment(for: arguments))
    }

    /// `broker serve` on a test database connects as the role it runs as in production, to
    /// which the tenant wall applies (decision 0055); admin commands keep the superuser's URL,
    /// as an operator's commands use the owner's. (On the embedded default, serve itself
    /// switches to that role.)
    private func environment(for arguments: [String]) -> [String: String] {
        guard arguments.first == "serve", let url = environment["DATABASE_URL"], url.contains("user=postgres") else { return environment }
        var environment = environment
        environment["DATABASE_URL"] = TestDatabase.servingURL(url)
        return environment
    }
}

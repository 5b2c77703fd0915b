import Foundation
import Glibc

/// Runs the machine's PostgreSQL programs (initdb, pg_ctl) and waits for them.
///
/// Uses posix_spawn and waitpid rather than Foundation's Process, whose waitUntilExit can
/// hang on Linux when the child leaves a detached grandchild (pg_ctl start does). Output goes
/// to a temporary file, so no pipe is inherited by the server it starts.
public enum ProcessRunner {
    public struct Result: Sendable {
        public let status: Int32
        public let output: String
    }

    /// Runs `executable` with `arguments`; as `user` when given (via runuser: PostgreSQL
    /// refuses root); in a new session when `newSession` (so a terminal's Ctrl-C does not
    /// reach a server other broker processes may still use).
    public static func run(
        _ executable: String, _ arguments: [String], as user: String? = nil, newSession: Bool = false,
        environment: [String: String]? = nil
    ) throws -> Result {
        let pid = try spawn(
            executable, arguments, as: user, newSession: newSession, environment: environment, outputPath: nil)
        return try wait(pid)
    }

    /// A started process: wait for it with ``wait(_:)``.
    public struct Running: Sendable {
        public let pid: pid_t
        let outputPath: String

        /// Sends a signal (e.g. SIGTERM).
        public func signal(_ signal: Int32) { kill(pid, signal) }

        /// What it printed so far.
        public var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }
    }

    /// Starts a process without waiting for it; its stdout and stderr go to `outputPath`
    /// (default: a new temporary file).
    public static func spawn(
        _ executable: String, _ arguments: [String], as user: String? = nil, newSession: Bool = false,
        environment: [String: String]? = nil, outputPath: String? = nil
    ) throws -> Running {
        var command = [executable] + arguments
        if let user { command = ["/sbin/runuser", "-u", user, "--"] + command }

        let outputPath =
            outputPath
            ?? FileManager.default.temporaryDirectory
            .appendingPathComponent("identitybroker-\(UUID().uuidString).out").path
        let outputFD = open(outputPath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard outputFD >= 0 else {
            throw StorageError.embeddedPostgres("Cannot create \(outputPath): \(String(cString: strerror(errno))).")
        }
        defer { close(outputFD) }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, outputFD, 1)
        posix_spawn_file_actions_adddup2(&actions, outputFD, 2)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // POSIX_SPAWN_SETSID (glibc 2.26+); its macro needs _GNU_SOURCE, so it is not imported.
        let posixSpawnSetSID: Int16 = 0x80
        if newSession { posix_spawnattr_setflags(&attributes, posixSpawnSetSID) }

        var argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var envp: [UnsafeMutablePointer<CChar>?] = (environment ?? [:]).map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in envp { free(pointer) } }
        var pid: pid_t = 0
        let spawned =
            if environment != nil {
                posix_spawn(&pid, command[0], &actions, &attributes, &argv, &envp)
            } else {
                posix_spawn(&pid, command[0], &actions, &attributes, &argv, environ)
            }
        guard spawned == 0 else {
            throw StorageError.embeddedPostgres("Cannot run \(command[0]): \(String(cString: strerror(spawned))).")
        }
        return Running(pid: pid, outputPath: outputPath)
    }

    /// Waits for a spawned process and returns its exit status and output.
    public static func wait(_ running: Running) throws -> Result {
        defer { unlink(running.outputPath) }
        var status: Int32 = 0
        while waitpid(running.pid, &status, 0) == -1 {
            guard errno == EINTR else {
                throw StorageError.embeddedPostgres("waitpid failed: \(String(cString: strerror(errno))).")
            }
        }
        let output = running.output
        // WIFEXITED / WEXITSTATUS, spelled out (the C macros are not imported).
        let exitCode: Int32 = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return Result(status: exitCode, output: output)
    }
}

import Foundation
import Glibc

/// Runs the machine's PostgreSQL programs (initdb, pg_ctl) and waits for them.
///
/// Uses posix_spawn and waitpid rather than Foundation's Process, whose waitUntilExit can
/// hang on Linux when the child leaves a detached grandchild (pg_ctl start does). Output goes
/// to a temporary file, so no pipe is inherited by the server it starts.
enum ProcessRunner {
    struct Result {
        let status: Int32
        let output: String
    }

    /// Runs `executable` with `arguments`; as `user` when given (via runuser: PostgreSQL
    /// refuses root); in a new session when `newSession` (so a terminal's Ctrl-C does not
    /// reach a server other broker processes may still use).
    static func run(_ executable: String, _ arguments: [String], as user: String? = nil, newSession: Bool = false)
        throws -> Result
    {
        var command = [executable] + arguments
        if let user { command = ["/sbin/runuser", "-u", user, "--"] + command }

        let outputPath = FileManager.default.temporaryDirectory
            .appendingPathComponent("identitybroker-\(UUID().uuidString).out").path
        let outputFD = open(outputPath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard outputFD >= 0 else {
            throw StorageError.embeddedPostgres("Cannot create \(outputPath): \(String(cString: strerror(errno))).")
        }
        defer {
            close(outputFD)
            unlink(outputPath)
        }

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
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, command[0], &actions, &attributes, &argv, environ)
        guard spawned == 0 else {
            throw StorageError.embeddedPostgres("Cannot run \(command[0]): \(String(cString: strerror(spawned))).")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            guard errno == EINTR else {
                throw StorageError.embeddedPostgres("waitpid failed for \(command[0]): \(String(cString: strerror(errno))).")
            }
        }
        let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        // WIFEXITED / WEXITSTATUS, spelled out (the C macros are not imported).
        let exitCode: Int32 = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return Result(status: exitCode, output: output)
    }
}

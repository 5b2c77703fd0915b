import Foundation
import Glibc
import Logging

/// The embedded default: a private PostgreSQL cluster in the broker's data folder, run with the
/// machine's PostgreSQL binaries, reachable only through a unix socket that only its owner
/// can open. Several broker processes (a server and admin commands) share one cluster: each
/// holds a shared lock while it uses it, and the last one out stops it.
///
/// Layout of the data folder (`BROKER_DATA_DIR`, default `./.broker`):
/// - `postgres/` the cluster (owned by the unprivileged user when run as root)
/// - `run/` the socket directory, or, when that path is too long for a unix socket, a private
///   folder made under /tmp with a random name (`mkdtemp`), recorded in `socket-dir`
/// - `master.key` the generated master key (see ``MasterKeyFile``)
/// - `launcher.lock`, `users.lock` coordination between processes
public struct EmbeddedPostgres: Sendable {
    public let dataDirectory: URL
    public let binDirectory: String
    /// The OS user that runs PostgreSQL when the broker runs as root (it refuses root).
    public let unprivilegedUser: String
    public let logger: Logger

    public static let databaseName = "postgres"
    public static let superuser = "postgres"

    public init(dataDirectory: URL, binDirectory: String? = nil, unprivilegedUser: String = "postgres", logger: Logger)
        throws
    {
        self.dataDirectory = dataDirectory.standardizedFileURL
        self.binDirectory = try binDirectory ?? Self.findBinDirectory()
        self.unprivilegedUser = unprivilegedUser
        self.logger = logger
    }

    var clusterDirectory: String { dataDirectory.appendingPathComponent("postgres").path }
    var logFile: String { clusterDirectory + "/server.log" }
    var isRoot: Bool { geteuid() == 0 }
    var runAs: String? { isRoot ? unprivilegedUser : nil }

    /// Unix socket paths are limited to 107 bytes. A data folder whose `run/` would be too long
    /// gets a folder under /tmp instead, made by ``prepareSocketDirectory()`` with an
    /// unpredictable name (another local user cannot pre-create it) and recorded in the data
    /// folder for the other broker processes sharing the cluster.
    public var socketDirectory: String {
        if let preferred = preferredSocketDirectory { return preferred }
        return (try? String(contentsOfFile: socketRecordFile, encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? "/nonexistent/identitybroker-socket"
    }

    /// `run/` in the data folder, when its socket path fits.
    var preferredSocketDirectory: String? {
        let preferred = dataDirectory.appendingPathComponent("run").path
        return (preferred + "/.s.PGSQL.5432").utf8.count < 100 ? preferred : nil
    }

    var socketRecordFile: String { dataDirectory.appendingPathComponent("socket-dir").path }

    /// The uid that must own the socket folder: PostgreSQL's (the unprivileged user when the
    /// broker runs as root), which is also the only one allowed in (mode 0700).
    var socketOwner: uid_t {
        guard isRoot, let entry = getpwnam(unprivilegedUser) else { return geteuid() }
        return entry.pointee.pw_uid
    }

    public var databaseConfiguration: DatabaseConfiguration {
        DatabaseConfiguration(
            endpoint: .unixSocket(path: socketDirectory + "/.s.PGSQL.5432"),
            username: Self.superuser, database: Self.databaseName, tlsMode: .disable)
    }

    /// Makes sure the cluster exists and runs; the returned lease keeps it running until released.
    public func start() throws -> Lease {
        try prepareDataDirectory()
        let launcher = try FileLock(path: dataDirectory.appendingPathComponent("launcher.lock").path)
        launcher.lockExclusive()
        defer { launcher.close() }

        if !FileManager.default.fileExists(atPath: clusterDirectory + "/PG_VERSION") {
            try initializeCluster()
        }
        try writeSettings()
        let users = try FileLock(path: dataDirectory.appendingPathComponent("users.lock").path)
        users.lockShared()
        if try !isRunning() {
            logger.info("starting embedded PostgreSQL", metadata: ["data": "\(clusterDirectory)"])
            let result = try pgCtl(["start", "-D", clusterDirectory, "-l", logFile, "-w", "-t", "60", "-s"], newSession: true)
            guard result.status == 0 else {
                users.close()
                throw StorageError.embeddedPostgres(
                    "PostgreSQL did not start (pg_ctl exit \(result.status)). \(result.output.trimmingCharacters(in: .whitespacesAndNewlines)) "
                        + "See \(logFile).")
            }
        }
        return Lease(postgres: self, users: users)
    }

    public func isRunning() throws -> Bool {
        guard FileManager.default.fileExists(atPath: clusterDirectory + "/postmaster.pid") else { return false }
        return try pgCtl(["status", "-D", clusterDirectory]).status == 0
    }

    /// Stops the cluster if no other broker process uses it.
    func stopIfUnused(users: FileLock) {
        users.close()
        do {
            let launcher = try FileLock(path: dataDirectory.appendingPathComponent("launcher.lock").path)
            launcher.lockExclusive()
            defer { launcher.close() }
            let probe = try FileLock(path: dataDirectory.appendingPathComponent("users.lock").path)
            defer { probe.close() }
            guard probe.tryLockExclusive() else {
                logger.debug("embedded PostgreSQL still in use by another broker process")
                return
            }
            if try isRunning() {
                logger.info("stopping embedded PostgreSQL")
                _ = try pgCtl(["stop", "-D", clusterDirectory, "-m", "fast", "-w", "-s"])
            }
        } catch {
            logger.error("could not stop embedded PostgreSQL: \(error)")
        }
    }

    /// Keeps the cluster running while held. `release()` stops it when nobody else uses it.
    public final class Lease: @unchecked Sendable {
        let postgres: EmbeddedPostgres
        let users: FileLock
        private var released = false

        init(postgres: EmbeddedPostgres, users: FileLock) {
            self.postgres = postgres
            self.users = users
        }

        public func release() {
            guard !released else { return }
            released = true
            postgres.stopIfUnused(users: users)
        }
    }

    // MARK: - Setup

    private func prepareDataDirectory() throws {
        let fm = FileManager.default
        // 0711: the unprivileged PostgreSQL user may traverse, but not list, the folder.
        try fm.createDirectory(at: dataDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o711])
        try fm.setAttributes([.posixPermissions: 0o711], ofItemAtPath: dataDirectory.path)
        try prepareSocketDirectory()
        if isRoot {
            let probe = try ProcessRunner.run("/usr/bin/test", ["-x", dataDirectory.path], as: unprivilegedUser)
            guard probe.status == 0 else {
                throw StorageError.embeddedPostgres(
                    "The '\(unprivilegedUser)' user that runs the embedded PostgreSQL cannot reach \(dataDirectory.path) "
                        + "(a parent folder is private). Set BROKER_DATA_DIR to a folder it can reach, e.g. /var/lib/identitybroker.")
            }
        }
    }

    /// Makes the socket folder (under the launcher lock): `run/` in the data folder, or a fresh
    /// `mkdtemp` folder under /tmp when that path is too long. Either way it must be a real
    /// folder (not a link), owned by PostgreSQL's user, mode 0700; one that is not is refused,
    /// never used.
    func prepareSocketDirectory() throws {
        if let preferred = preferredSocketDirectory {
            if !FileManager.default.fileExists(atPath: preferred) {
                try FileManager.default.createDirectory(
                    atPath: preferred, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
                if isRoot { try chown(preferred) }
            }
            try checkPrivate(preferred)
            return
        }
        let recorded = socketDirectory
        if FileManager.default.fileExists(atPath: recorded) {
            try checkPrivate(recorded)
            return
        }
        var template = Array("/tmp/identitybroker-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw StorageError.embeddedPostgres("Could not make a private socket folder under /tmp (errno \(errno)).")
        }
        let path = String(cString: made)
        if isRoot { try chown(path) }
        try checkPrivate(path)
        try path.write(toFile: socketRecordFile, atomically: true, encoding: .utf8)
    }

    private func checkPrivate(_ path: String) throws {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            throw StorageError.embeddedPostgres("The socket folder \(path) cannot be read (errno \(errno)).")
        }
        let isDirectory = info.st_mode & S_IFMT == S_IFDIR
        guard isDirectory, info.st_uid == socketOwner, info.st_mode & 0o777 == 0o700 else {
            throw StorageError.embeddedPostgres(
                "The socket folder \(path) is not a private folder of the user running PostgreSQL (it must be a directory, not a link, owned by uid \(socketOwner), mode 0700). "
                    + "Someone else may have made it: remove it"
                    + (preferredSocketDirectory == nil ? " and \(socketRecordFile)" : "") + ", or set BROKER_DATA_DIR to a shorter path.")
        }
    }

    private func initializeCluster() throws {
        logger.info("initializing embedded PostgreSQL cluster", metadata: ["data": "\(clusterDirectory)"])
        try FileManager.default.createDirectory(
            atPath: clusterDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        if isRoot { try chown(clusterDirectory) }
        let result = try ProcessRunner.run(
            binDirectory + "/initdb",
            ["-D", clusterDirectory, "-U", Self.superuser, "--auth=trust", "--encoding=UTF8", "--no-locale", "--no-instructions"],
            as: runAs, environment: Self.programEnvironment())
        guard result.status == 0 else {
            try? FileManager.default.removeItem(atPath: clusterDirectory)
            throw StorageError.embeddedPostgres("initdb failed (exit \(result.status)): \(result.output.suffix(800))")
        }
        let conf = clusterDirectory + "/postgresql.conf"
        let include = "\ninclude_if_exists = 'broker.conf'\n"
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: conf))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(include.utf8))
        try handle.close()
    }

    /// Settings rewritten on every start, so a moved data folder keeps working.
    private func writeSettings() throws {
        let settings = """
            # Written by the broker on every start; edit postgresql.conf for your own settings.
            listen_addresses = ''
            port = 5432
            unix_socket_directories = '\(socketDirectory.replacingOccurrences(of: "'", with: "''"))'
            unix_socket_permissions = 0700
            max_connections = 200
            """
        let path = clusterDirectory + "/broker.conf"
        try settings.write(toFile: path, atomically: true, encoding: .utf8)
        if isRoot { try chown(path) }
    }

    private func pgCtl(_ arguments: [String], newSession: Bool = false) throws -> ProcessRunner.Result {
        try ProcessRunner.run(
            binDirectory + "/pg_ctl", arguments, as: runAs, newSession: newSession, environment: Self.programEnvironment())
    }

    /// The caller's environment without PostgreSQL's own variables (`PGPORT`, `PGHOST`,
    /// `PGDATA`, …): the server and its programs read them as defaults, and the embedded cluster
    /// is the broker's, on its own socket and port (issue 39 F20: with `PGPORT=6543` the server
    /// listened on `.s.PGSQL.6543` while the broker dialled 5432).
    static func programEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> [String: String] {
        environment.filter { !$0.key.hasPrefix("PG") }
    }

    private func chown(_ path: String) throws {
        try FileManager.default.setAttributes(
            [.ownerAccountName: unprivilegedUser, .groupOwnerAccountName: groupName(of: unprivilegedUser)],
            ofItemAtPath: path)
    }

    private func groupName(of user: String) -> String {
        guard let entry = getpwnam(user), let group = getgrgid(entry.pointee.pw_gid) else { return user }
        return String(cString: group.pointee.gr_name)
    }

    /// `BROKER_POSTGRES_BIN`, else the newest /usr/lib/postgresql/N/bin, else initdb on PATH.
    static func findBinDirectory() throws -> String {
        let fm = FileManager.default
        if let versions = try? fm.contentsOfDirectory(atPath: "/usr/lib/postgresql") {
            let sorted = versions.compactMap { Int($0) }.sorted(by: >)
            for version in sorted where fm.isExecutableFile(atPath: "/usr/lib/postgresql/\(version)/bin/initdb") {
                return "/usr/lib/postgresql/\(version)/bin"
            }
        }
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            if fm.isExecutableFile(atPath: "\(directory)/initdb") && fm.isExecutableFile(atPath: "\(directory)/pg_ctl") {
                return String(directory)
            }
        }
        throw StorageError.embeddedPostgres(
            "No PostgreSQL server binaries found (initdb, pg_ctl). Install them (apt-get install postgresql) "
                + "or set BROKER_POSTGRES_BIN, or set DATABASE_URL to use an existing PostgreSQL.")
    }
}

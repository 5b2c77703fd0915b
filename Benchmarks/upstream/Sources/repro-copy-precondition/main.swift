// `PostgresConnection.copyFrom` stops the process when the server goes away right after its
// CopyInResponse: `ConnectionStateMachine.checkBackendCanReceiveCopyData` (also `sendCopyDone`,
// `sendCopyFail`) calls `preconditionFailure("Copy mode is only supported for extended queries")`
// once the connection state has left `.extendedQuery` (closing) while the channel handler is
// still in the pipeline, i.e. until the handlers' removal, a task the event loop runs after the
// close. Here the connection's event loop is busy while the server answers the COPY and is then
// terminated, so it reads CopyInResponse, the FATAL error and the end of the stream together;
// the writer, on that loop, resumes before the handlers are removed, and its first write stops
// the process instead of failing the copy. Met as a database stopped during an import.
//
// REPRO_POSTGRES=postgres://user:password@127.0.0.1:5432/database swift run repro-copy-precondition
// Runs the copy in a child process of itself. Exit 0: still present (the child stopped on the
// precondition). Exit 1: fixed upstream (the copy failed with an error). 2: setup or inconclusive.
import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO

func databaseConfiguration() -> PostgresConnection.Configuration {
    guard let text = ProcessInfo.processInfo.environment["REPRO_POSTGRES"], let url = URLComponents(string: text),
        let host = url.host, let user = url.user
    else {
        print("set REPRO_POSTGRES=postgres://user:password@127.0.0.1:5432/database")
        exit(2)
    }
    let database = url.path.count > 1 ? String(url.path.dropFirst()) : nil
    return .init(host: host, port: url.port ?? 5432, username: user, password: url.password, database: database, tls: .disable)
}

final class LoopExecutor: TaskExecutor {
    let loop: any EventLoop
    init(_ loop: any EventLoop) { self.loop = loop }
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        loop.execute { job.runSynchronously(on: executor) }
    }
}

enum AdminThread { static let group = MultiThreadedEventLoopGroup(numberOfThreads: 1) }

/// The child: the server answers a COPY with CopyInResponse and goes away before the client has
/// read that answer (its event loop busy, as on a loaded machine); the writer then writes.
func copyWhileTheServerGoesAway() async throws -> Int32 {
    alarm(20)  // a hang ends the child (SIGALRM), reported as inconclusive
    let logger = Logger(label: "repro")
    let connection = try await PostgresConnection.connect(configuration: databaseConfiguration(), id: 1, logger: logger)
    let admin = try await PostgresConnection.connect(on: AdminThread.group.next(), configuration: databaseConfiguration(), id: 0, logger: logger)
    _ = try await connection.query("CREATE TEMP TABLE repro_copy_probe (id int)", logger: logger).collect()
    let pid = try await connection.query("SELECT pg_backend_pid()", logger: logger).collect().first?.decode(Int32.self) ?? 0
    let copy = Task(executorPreference: LoopExecutor(connection.eventLoop)) {
        try await connection.copyFrom(table: "repro_copy_probe", logger: logger) { writer in
            try await writer.write(ByteBuffer(string: "1\n"))
        }
    }
    connection.eventLoop.execute { usleep(1_500_000) }  // queued behind the COPY's write
    for _ in 0..<100 {
        let waiting = try await admin.query(
            "SELECT count(*)::int FROM pg_stat_activity WHERE pid = \(pid) AND query LIKE 'COPY%' AND wait_event = 'ClientRead'",
            logger: logger
        ).collect().first?.decode(Int.self)
        if waiting == 1 { break }
        try await Task.sleep(for: .milliseconds(10))
    }
    _ = try await admin.query("SELECT pg_terminate_backend(\(pid))", logger: logger).collect()
    do {
        try await copy.value
        print("child: the COPY succeeded")
    } catch {
        print("child: the COPY failed: \(String(reflecting: error))")
    }
    return 3
}

if CommandLine.arguments.dropFirst().first == "--child" { exit(try await copyWhileTheServerGoesAway()) }

let child = Process()
child.executableURL = Bundle.main.executableURL
child.arguments = ["--child"]
child.environment = ProcessInfo.processInfo.environment.merging(["SWIFT_BACKTRACE": "enable=no"]) { $1 }
let errors = Pipe()
child.standardError = errors
try child.run()
child.waitUntilExit()
let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
let fatal = stderr.split(separator: "\n").first { $0.contains("Fatal error") } ?? ""
if child.terminationReason == .uncaughtSignal && stderr.contains("Copy mode is only supported") {
    print("child stopped by signal \(child.terminationStatus): \(fatal)")
    print("still present: a COPY whose server went away stopped the process (preconditionFailure) instead of failing")
    exit(0)
}
if child.terminationReason == .exit && child.terminationStatus == 3 {
    print("fixed upstream: the COPY whose server went away ended with an error, the process went on")
    exit(1)
}
print("inconclusive: child ended with \(child.terminationReason == .exit ? "status" : "signal") \(child.terminationStatus)\n\(stderr)")
exit(2)

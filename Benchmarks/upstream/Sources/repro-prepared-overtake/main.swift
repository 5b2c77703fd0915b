// A statement written on a connection while another is in flight is queued by PostgresNIO and
// sent when the first one's ReadyForQuery arrives: the two reach PostgreSQL in the order they were
// written. Not so for a prepared statement (`PostgresPreparedStatement`) the connection has not
// prepared yet: PostgresNIO queues its preparation, and queues its execution only once the
// preparation is answered, behind whatever was written meanwhile. A statement written after it
// then runs before it. Here the follower counts the row the prepared INSERT inserts: 0 means it
// overtook the INSERT. The second round (the INSERT now prepared) is the control: 1.
//
// REPRO_POSTGRES=postgres://user:password@127.0.0.1:5432/database swift run repro-prepared-overtake
// Exit 0: still present. Exit 1: fixed upstream (the follower ran after the INSERT). 2: setup.
import Foundation
import Logging
import NIOCore
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

struct ProbeInsert: PostgresPreparedStatement {
    static let name = "repro_overtake_insert"
    static let sql = "INSERT INTO repro_overtake_probe VALUES ($1) RETURNING id"
    typealias Row = Int
    let id: Int
    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings()
        bindings.append(id)
        return bindings
    }
    func decodeRow(_ row: PostgresRow) throws -> Int { try row.decode(Int.self) }
}

/// Runs jobs on one event loop: the INSERT is written before its task first suspends, and the
/// follower, a child task queued on the same loop, is written right after it, before any answer.
final class LoopExecutor: TaskExecutor {
    let loop: any EventLoop
    init(_ loop: any EventLoop) { self.loop = loop }
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        loop.execute { job.runSynchronously(on: executor) }
    }
}

func count(_ id: Int, on connection: PostgresConnection, logger: Logger) async throws -> Int {
    try await connection.query("SELECT count(*)::int FROM repro_overtake_probe WHERE id = \(id)", logger: logger)
        .collect().first?.decode(Int.self) ?? -1
}

/// The prepared INSERT of `id`, and right behind it on the same connection a count of `id`.
func insertThenCount(_ id: Int, on connection: PostgresConnection, logger: Logger) async throws -> Int {
    try await withTaskExecutorPreference(LoopExecutor(connection.eventLoop), isolation: nil) {
        async let follower = count(id, on: connection, logger: logger)
        for try await _ in try await connection.execute(ProbeInsert(id: id), logger: logger) {}
        return try await follower
    }
}

let logger = Logger(label: "repro")
let connection = try await PostgresConnection.connect(configuration: databaseConfiguration(), id: 1, logger: logger)
_ = try await connection.query("DROP TABLE IF EXISTS repro_overtake_probe", logger: logger).collect()
_ = try await connection.query("CREATE TABLE repro_overtake_probe (id int NOT NULL)", logger: logger).collect()

let first = try await insertThenCount(1, on: connection, logger: logger)
print("first execution of the prepared INSERT (not prepared on this connection yet): the follower counted \(first)")
let second = try await insertThenCount(2, on: connection, logger: logger)
print("second execution (already prepared), the control: the follower counted \(second)")

_ = try await connection.query("DROP TABLE repro_overtake_probe", logger: logger).collect()
try await connection.close().get()
if first == 0 && second == 1 {
    print("still present: a statement written after a not-yet-prepared statement ran before it")
    exit(0)
}
if first == 1 && second == 1 {
    print("fixed upstream: the follower ran after the INSERT both times")
    exit(1)
}
print("unexpected outcome: \(first), \(second)")
exit(2)

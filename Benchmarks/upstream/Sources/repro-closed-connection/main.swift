// A statement written to a `PostgresConnection` whose channel has closed is never answered:
// `query` writes its task with `channel.write(…, promise: nil)`, the write fails on the closed
// channel and nobody hears of it, so the statement's promise is never completed and the caller
// waits forever (holding its pool lease, when it came from `PostgresClient`). The pool can lease
// a connection in the moment between its channel closing and the pool hearing of the close, so
// this also happens to `PostgresClient` callers after a backend is terminated.
//
// REPRO_POSTGRES=postgres://user:password@127.0.0.1:5432/database swift run repro-closed-connection
// Exit 0: still present (no answer within 5 s). Exit 1: fixed upstream (it fails at once). 2: setup.
import Foundation
import Logging
import PostgresNIO
import Synchronization

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

final class Outcome: Sendable { let text = Mutex<String?>(nil) }

func reproduce() async throws -> Int32 {
    let logger = Logger(label: "repro")
    let admin = try await PostgresConnection.connect(configuration: databaseConfiguration(), id: 0, logger: logger)
    let connection = try await PostgresConnection.connect(configuration: databaseConfiguration(), id: 1, logger: logger)
    let pid = try await connection.query("SELECT pg_backend_pid()", logger: logger).collect().first?.decode(Int32.self) ?? 0
    // The server ends the session (as a restart, a failover or pg_terminate_backend does).
    try await admin.query("SELECT pg_terminate_backend(\(pid))", logger: logger)
    try? await connection.closeFuture.get()
    try await Task.sleep(for: .milliseconds(200))
    print("connection closed: \(connection.isClosed)")

    let outcome = Outcome()
    Task {
        do {
            let rows = try await connection.query("SELECT 1", logger: logger).collect()
            outcome.text.withLock { $0 = "answered with \(rows.count) row(s)" }
        } catch {
            outcome.text.withLock { $0 = "failed: \(String(reflecting: error))" }
        }
    }
    try await Task.sleep(for: .seconds(5))
    try await admin.close().get()
    if let text = outcome.text.withLock({ $0 }) {
        print("fixed upstream: a statement written to the closed connection \(text)")
        return 1
    }
    print("still present: a statement written to the closed connection was neither answered nor failed within 5 s")
    return 0
}

exit(try await reproduce())

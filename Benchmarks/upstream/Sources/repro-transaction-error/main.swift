// `PostgresConnection.withTransaction` (and `PostgresClient.withTransaction`) wraps whatever the
// closure throws in `PostgresTransactionError` (`closureError`, `rollbackError`, `commitError`),
// so a caller cannot catch its own error type through a transaction as it does around a single
// statement. The broker writes BEGIN/COMMIT/ROLLBACK by hand where one code path must throw the
// same errors with and without a transaction around it. Not a defect: a design choice upstream
// that a variant passing the closure's error through (after a successful ROLLBACK) would serve.
//
// REPRO_POSTGRES=postgres://user:password@127.0.0.1:5432/database swift run repro-transaction-error
// Exit 0: still wrapped. Exit 1: the closure's own error came through. 2: setup.
import Foundation
import Logging
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

struct Refused: Error {}

let logger = Logger(label: "repro")
let connection = try await PostgresConnection.connect(configuration: databaseConfiguration(), id: 1, logger: logger)
var caught: any Error = CancellationError()
do {
    try await connection.withTransaction(logger: logger) { connection in
        _ = try await connection.query("SELECT 1", logger: logger).collect()
        throw Refused()
    }
} catch {
    caught = error
}
try await connection.close().get()
print("the closure threw Refused(); the caller caught: \(String(reflecting: caught))")
if let wrapped = caught as? PostgresTransactionError, wrapped.closureError is Refused, wrapped.rollbackError == nil {
    print("still present: the closure's error arrives wrapped in PostgresTransactionError (rolled back)")
    exit(0)
}
if caught is Refused {
    print("fixed upstream: the closure's own error came through")
    exit(1)
}
print("unexpected outcome")
exit(2)

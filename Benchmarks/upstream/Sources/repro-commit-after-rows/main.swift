// PostgresNIO hands a one-statement write's rows over at `CommandComplete`. Outside a transaction
// PostgreSQL commits that statement at `Sync`, after `CommandComplete`; a commit that fails there
// (here a deferred constraint trigger; in production a backend terminated between the two) sends
// its ErrorResponse after the rows. PostgresNIO has already answered the caller with the rows,
// takes the error as an unexpected message and closes the connection: the caller saw a success
// for a write that was rolled back. Nothing in the API resolves at the statement's ReadyForQuery.
//
// REPRO_POSTGRES=postgres://user:password@127.0.0.1:5432/database swift run repro-commit-after-rows
// Exit 0: still present. Exit 1: fixed upstream (the write fails with the commit's error). 2: setup.
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

let logger = Logger(label: "repro")
let admin = try await PostgresConnection.connect(configuration: databaseConfiguration(), id: 0, logger: logger)
for statement: PostgresQuery in [
    "DROP TABLE IF EXISTS repro_commit_probe",
    "DROP FUNCTION IF EXISTS repro_commit_refuse()",
    "CREATE TABLE repro_commit_probe (id int NOT NULL)",
    """
    CREATE FUNCTION repro_commit_refuse() RETURNS trigger LANGUAGE plpgsql
    AS $$ BEGIN RAISE EXCEPTION 'refused at commit'; END $$
    """,
    """
    CREATE CONSTRAINT TRIGGER repro_commit_refuse AFTER INSERT ON repro_commit_probe
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION repro_commit_refuse()
    """,
] {
    _ = try await admin.query(statement, logger: logger).collect()
}

var answeredWithRows = 0
var failed = 0
for attempt in 1...10 {
    let connection = try await PostgresConnection.connect(configuration: databaseConfiguration(), id: attempt, logger: logger)
    do {
        // One statement, extended protocol, no transaction: committed at its Sync.
        let rows = try await connection.query("INSERT INTO repro_commit_probe VALUES (\(attempt)) RETURNING id", logger: logger)
            .collect()
        let ids = try rows.map { try $0.decode(Int.self) }
        answeredWithRows += 1
        try? await Task.sleep(for: .milliseconds(100))
        print("attempt \(attempt): INSERT … RETURNING answered rows \(ids); connection closed since: \(connection.isClosed)")
    } catch {
        failed += 1
        print("attempt \(attempt): INSERT failed: \(String(reflecting: error))")
    }
    try? await connection.close().get()
}

let stored = try await admin.query("SELECT count(*)::int FROM repro_commit_probe", logger: logger).collect().first?.decode(Int.self)
_ = try await admin.query("DROP TABLE repro_commit_probe", logger: logger).collect()
_ = try await admin.query("DROP FUNCTION repro_commit_refuse()", logger: logger).collect()
try await admin.close().get()

print("rows committed: \(stored ?? -1) of 10 inserts (the trigger refuses every commit)")
if stored == 0 && answeredWithRows > 0 {
    print("still present: \(answeredWithRows) of 10 inserts returned their rows as a success although their commit failed at Sync")
    exit(0)
}
if stored == 0 && failed == 10 {
    print("fixed upstream: every insert whose commit failed at Sync failed for its caller")
    exit(1)
}
print("unexpected outcome (the trigger did not refuse the commits?)")
exit(2)

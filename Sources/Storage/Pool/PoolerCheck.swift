import Foundation
import Logging
import PostgresNIO

/// What a connection pooler between the broker and PostgreSQL does to the broker's
/// connections, as far as it changes how the broker must talk (decision 0086).
public struct PoolerFinding: Sendable, Equatable {
    /// Two of the broker's connections were served by one PostgreSQL backend, or one of them by
    /// two: a pooler in transaction (or statement) mode, which hands a server connection to
    /// another client between transactions. Session settings, session locks, `LISTEN` and
    /// named prepared statements do not survive that.
    public var sharesServerConnections: Bool
    /// Whether a named prepared statement, prepared on one connection, ran there again once the
    /// pooler had moved that connection to another backend (PgBouncer 1.21 and later with
    /// `max_prepared_statements`). Nil when it was not seen either way (no pooler, or a pool of
    /// one server connection, where the move never happened).
    public var carriesNamedStatements: Bool?

    public init(sharesServerConnections: Bool, carriesNamedStatements: Bool?) {
        self.sharesServerConnections = sharesServerConnections
        self.carriesNamedStatements = carriesNamedStatements
    }
}

/// Finds out whether the database is reached through a pooler in transaction mode, with two
/// connections of its own outside every pool, before the broker relies on its connections'
/// sessions. PostgreSQL itself (or a pooler in session mode) gives each client connection one
/// backend for its life. A pooler in transaction mode gives a client a backend per transaction:
///
/// 1. the first connection asks its backend's pid, with a named prepared statement whose name
///    is new each round (PostgresNIO's `prepare(query:)`: `nio-postgres-` and a UUID), so that
///    no other client's statement (another instance checking at the same moment, or one left on
///    a server connection) can answer for it; when the pooler moved the connection between
///    preparing and running it, SQLSTATE 26000 already shows the pooler;
/// 2. the second opens a transaction and asks its own: that pins a backend to it, the first's
///    when the pooler reuses the backend freed last (PgBouncer's default, `server_round_robin
///    = 0`), and then the pids are equal;
/// 3. the first asks again: a pooler gives it another backend (another pid), or, with no other
///    to give, keeps it waiting until the second's transaction ends. The named statement of
///    step 1 either runs there (the pooler carries it) or does not exist (SQLSTATE 26000);
/// 4. the second rolls back.
///
/// A round that shows nothing is tried again (another pooler may pick backends otherwise), three
/// rounds in all; on PostgreSQL itself, each round costs three short statements.
public enum PoolerCheck {
    /// How long the third step may wait before the wait itself shows the pooler.
    static let shareWait: Duration = .seconds(1)

    public static func check(_ configuration: DatabaseConfiguration, logger: Logger) async throws -> PoolerFinding {
        var quiet = logger
        quiet.logLevel = .critical
        let settings = try configuration.connectionConfiguration()
        let first = try await PostgresConnection.connect(configuration: settings, id: 1, logger: quiet)
        let second: PostgresConnection
        do {
            second = try await PostgresConnection.connect(configuration: settings, id: 2, logger: quiet)
        } catch {
            try? await first.close()
            throw error
        }
        do {
            var finding = PoolerFinding(sharesServerConnections: false, carriesNamedStatements: nil)
            for _ in 0..<3 where !finding.sharesServerConnections {
                finding = try await round(first, second, logger: quiet)
            }
            try? await first.close()
            try? await second.close()
            return finding
        } catch {
            try? await first.close()
            try? await second.close()
            throw error
        }
    }

    private enum Answer: Sendable {
        case pid(Int32)
        case namedStatementMissing
        case waited
    }

    private static func round(_ first: PostgresConnection, _ second: PostgresConnection, logger: Logger) async throws
        -> PoolerFinding
    {
        let before: Int32
        let pidStatement: PreparedQuery
        do {
            pidStatement = try await first.prepare(query: "SELECT pg_backend_pid()::text").get()
            before = try await backendPID(pidStatement)
        } catch let error where Self.statementMissing(error) {
            // PostgresNIO prepares a statement and runs it in two exchanges, each ended by its
            // own `Sync`, and a pooler in transaction mode that has other clients (another
            // instance starting at the same moment) may hand the second to another backend,
            // where the statement does not exist (26000). 42P05 (the name exists already) cannot
            // come of a name new each round, and would show a shared backend too.
            return PoolerFinding(sharesServerConnections: true, carriesNamedStatements: false)
        }
        try await second.query("BEGIN", logger: logger)
        do {
            let pinned = try await second.query("SELECT pg_backend_pid()", logger: logger).collect().first?.decode(Int32.self)
            let answer = try await withThrowingTaskGroup(of: Answer.self) { group in
                group.addTask {
                    do {
                        return .pid(try await backendPID(pidStatement))
                    } catch let error where Self.statementMissing(error) {
                        return .namedStatementMissing
                    }
                }
                group.addTask {
                    try await Task.sleep(for: shareWait)
                    return .waited
                }
                let answer = try await group.next() ?? .waited
                if case .waited = answer {
                    // The first connection's statement waits for a backend the second holds:
                    // end the second's transaction and let it be answered, then stop.
                    _ = try? await second.query("ROLLBACK", logger: logger)
                    _ = try? await group.next()
                }
                group.cancelAll()
                return answer
            }
            _ = try? await second.query("ROLLBACK", logger: logger)
            switch answer {
            case .waited:
                return PoolerFinding(sharesServerConnections: true, carriesNamedStatements: nil)
            case .namedStatementMissing:
                return PoolerFinding(sharesServerConnections: true, carriesNamedStatements: false)
            case .pid(let after):
                let shares = after != before || pinned == before
                return PoolerFinding(sharesServerConnections: shares, carriesNamedStatements: after != before ? true : nil)
            }
        } catch {
            _ = try? await second.query("ROLLBACK", logger: logger)
            throw error
        }
    }

    /// Whether PostgreSQL answered that the named statement does not exist (26000) or exists
    /// already (42P05). `PostgresDatabase.prepare(query:)`, PostgresNIO's one way to prepare under
    /// a name of its own making, answers with the older `PostgresError` (1.33.2).
    private static func statementMissing(_ error: any Error) -> Bool {
        let state: String? =
            if case .server(let answer) = error as? PostgresError { answer.fields[.sqlState] } else {
                (error as? PSQLError)?.sqlState
            }
        return state == "26000" || state == "42P05"
    }

    private static func backendPID(_ statement: PreparedQuery) async throws -> Int32 {
        // As text: the older API's rows come in text format, which `Int32`'s decoding refuses.
        try await statement.execute().get().first.flatMap { Int32(try $0.decode(String.self)) } ?? 0
    }
}

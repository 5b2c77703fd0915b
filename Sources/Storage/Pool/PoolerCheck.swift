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
/// 1. the first connection asks its backend's pid (a named prepared statement);
/// 2. the second opens a transaction and asks its own: that pins a backend to it, the first's
///    when the pooler reuses the backend freed last (PgBouncer's default, `server_round_robin
///    = 0`), and then the pids are equal;
/// 3. the first asks again: a pooler gives it another backend (another pid), or, with no other
///    to give, keeps it waiting until the second's transaction ends. The named statement of
///    step 1 either runs there (the pooler carries it) or does not exist (SQLSTATE 26000);
///    a backend that already has it though this connection never prepared it there (42P05,
///    an earlier check's left on a server connection) shows the same;
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
        do {
            before = try await backendPID(first, logger: logger)
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "42P05" {
            // The backend had the statement already, though this connection never prepared it:
            // another client's (an earlier check's) left on a server connection they share.
            return PoolerFinding(sharesServerConnections: true, carriesNamedStatements: false)
        }
        try await second.query("BEGIN", logger: logger)
        do {
            let pinned = try await second.query("SELECT pg_backend_pid()", logger: logger).collect().first?.decode(Int32.self)
            let answer = try await withThrowingTaskGroup(of: Answer.self) { group in
                group.addTask {
                    do {
                        return .pid(try await backendPID(first, logger: logger))
                    } catch let error as PSQLError where ["26000", "42P05"].contains(error.serverInfo?[.sqlState]) {
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

    private static func backendPID(_ connection: PostgresConnection, logger: Logger) async throws -> Int32 {
        var pid: Int32 = 0
        for try await value in try await connection.execute(BackendPIDStatement(), logger: logger) { pid = value }
        return pid
    }
}

/// The backend's pid, as a named prepared statement (``PoolerCheck``).
struct BackendPIDStatement: PostgresPreparedStatement {
    static let name = "ib_pooler_check"
    static let sql = "SELECT pg_backend_pid()"
    typealias Row = Int32
    func makeBindings() -> PostgresBindings { PostgresBindings() }
    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Int32.self) }
}

import Logging
import PostgresNIO

extension PostgresConnection {
    /// Returns once the statements sent before on this connection are committed: a statement
    /// sent after them is answered (PostgreSQL reaches it only after their implicit commit at
    /// `Sync`; a commit that fails there closes the connection, which fails it). Throws
    /// ``CommitUnconfirmed``, or PostgresNIO's closed-connection error, when the connection
    /// closed first, whether or not they were committed (decision 0056).
    ///
    /// A statement written to a connection whose channel has closed is never answered:
    /// PostgresNIO drops it with the write that failed. So nothing is written once the
    /// channel is inactive (a failed commit has closed it by the time its rows are read: the
    /// error and `CommandComplete` come in one flush).
    func confirmCommitted(logger: Logger) async throws {
        guard !isClosed else { throw CommitUnconfirmed() }
        for try await _ in try await execute(CommitConfirmation(), logger: logger) {}
    }
}

/// The statement that confirms a commit: prepared once per connection, so that PostgreSQL only
/// binds and runs it (no parse or plan).
struct CommitConfirmation: PostgresPreparedStatement {
    static let name = "ib_commit_confirmation"
    static let sql = "SELECT true"
    typealias Row = Bool
    func makeBindings() -> PostgresBindings { PostgresBindings() }
    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Bool.self) }
}

/// A write's connection closed before its commit could be confirmed: it may or may not have
/// been committed. The database is treated as unavailable (503, retried by the caller).
public struct CommitUnconfirmed: Error, Sendable, CustomStringConvertible {
    public init() {}
    public var description: String { "the connection closed before the write's commit was confirmed" }
}

extension PostgresClient {
    /// `withConnection`, with a connection that is open when `body` gets it. A connection's
    /// channel is inactive a moment before the pool hears of its close, and the pool may lease
    /// it in that moment; a statement written to it would never be answered (see
    /// ``PostgresConnection/confirmCommitted(logger:)``). Nothing has been sent on it then, so
    /// another lease is safe, once the close is through (the pool has dropped that connection
    /// by then): each try costs no round trip and drops one closed connection, and after
    /// ``openConnectionTries`` (more than a pool's connections) the database is unavailable
    /// (``ConnectionClosedBeforeUse``).
    func withOpenConnection<Result: Sendable>(
        isolation: isolated (any Actor)? = #isolation, _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        var tries = 1
        while true {
            do {
                return try await withConnection(isolation: isolation) { connection in
                    guard !connection.isClosed else { throw ConnectionClosedBeforeUse(closed: connection.closeFuture) }
                    return try await body(connection)
                }
            } catch let error as ConnectionClosedBeforeUse {
                guard tries < Self.openConnectionTries, let closed = error.closed else { throw error }
                // The pool's own close handler was attached first, and runs first.
                try? await closed.get()
                tries += 1
            }
        }
    }

    static let openConnectionTries = 100
}

/// The pool leased connections that had closed, ``PostgresClient/openConnectionTries`` in a row.
public struct ConnectionClosedBeforeUse: Error, Sendable, CustomStringConvertible {
    let closed: EventLoopFuture<Void>?
    init(closed: EventLoopFuture<Void>?) { self.closed = closed }
    public var description: String { "the pool leased connections that had closed" }
}

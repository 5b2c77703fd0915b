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
    ///
    /// Written behind its statement (``committed(_:logger:)``), the confirmation is already
    /// queued in PostgresNIO when a failed commit's error arrives after `CommandComplete`:
    /// PostgresNIO 1.33 takes that error as an unexpected message, closes the connection and
    /// fails the queued confirmation with it. Any failure of the confirmation is the same
    /// answer: the commit is unconfirmed.
    ///
    /// Upstream (docs/upstream.md, "Commit after the rows"): seen with PostgresNIO 1.33.2, which
    /// hands a statement's rows over at `CommandComplete`, reports nothing of a commit that fails
    /// at `Sync` after it, and has no call that resolves at the statement's `ReadyForQuery`. The
    /// confirmation (and ``StatementEffect``, which picks the statements that pay for it) can go
    /// when `Benchmarks/upstream`'s `repro-commit-after-rows` exits 1 against a newer release
    /// (the INSERT fails with the commit's error) and `CommitConfirmationTests` pass without it.
    /// The guard on `isClosed` is the other hole (docs/upstream.md, "A statement on a closed
    /// connection"): it can go when `repro-closed-connection` exits 1.
    ///
    /// `named`: the confirmation is a prepared statement (``CommitConfirmation``); false, sent
    /// unnamed (`BROKER_DB_PREPARED_STATEMENTS=unnamed`).
    func confirmCommitted(named: Bool = true, logger: Logger) async throws {
        guard !isClosed else { throw CommitUnconfirmed() }
        do {
            if named {
                for try await _ in try await execute(CommitConfirmation(), logger: logger) {}
            } else {
                _ = try await query(PostgresQuery(unsafeSQL: CommitConfirmation.sql), logger: logger).collect()
            }
        } catch {
            logger.debug("commit unconfirmed", metadata: ["error": "\(String(reflecting: error))"])
            throw CommitUnconfirmed()
        }
    }
}

extension PostgresConnection {
    /// `first`, then `then` on this connection, with `then` written right behind `first`
    /// rather than after `first`'s answer: both run on the connection's event loop, `first`
    /// writes its statement before it first suspends (PostgresNIO 1.33's `execute` and `query`
    /// write synchronously on the channel's loop), and `then`'s job, queued on that loop behind
    /// `first`'s, runs only once `first` has suspended. PostgresNIO queues the second statement
    /// and sends it the moment the first one's `ReadyForQuery` arrives, on the event loop, so the
    /// caller wakes once for both answers instead of once for each with a write in between
    /// (decision 0077).
    ///
    /// `first` must write exactly one statement, as its first step, and one PostgresNIO sends as
    /// it comes: a prepared statement the connection has not prepared yet is not (PostgresNIO
    /// queues its preparation, and its execution only when the preparation is answered, behind
    /// whatever was queued meanwhile; see ``Pipelining``).
    ///
    /// Upstream (docs/upstream.md, "A prepared statement overtaken"): seen with PostgresNIO
    /// 1.33.2 (`PostgresChannelHandler`'s `.executePreparedStatement`: `prepareStatementComplete`
    /// enqueues the execution only when the preparation is answered). The first run alone on
    /// each connection (``Pipelining/prepared(_:)``, ``ConnectionScopes/hasPrepared(_:on:)``)
    /// can go when `PipelinedStatementTests.aFollowerOvertakesAStatementNotPreparedYet` fails,
    /// or `Benchmarks/upstream`'s `repro-prepared-overtake` exits 1, against a newer release.
    func pipelined<First: Sendable, Then: Sendable>(
        _ first: @Sendable () async throws -> First, then: @escaping @Sendable () async throws -> Then
    ) async throws -> (First, Then) {
        try await withTaskExecutorPreference(EventLoopTaskExecutor.executor(for: eventLoop)) {
            async let second = then()
            let answer = try await first()
            return (answer, try await second)
        }
    }

    /// `statement`'s result, returned once it is committed: ``confirmCommitted(logger:)``
    /// written right behind it (``pipelined(_:then:)``).
    func committed<Result: Sendable>(
        _ statement: @Sendable () async throws -> Result, named: Bool = true, logger: Logger
    ) async throws -> Result {
        try await pipelined(statement, then: { try await self.confirmCommitted(named: named, logger: logger) }).0
    }
}

/// Whether a one-statement write may have its confirmation written behind it
/// (``PostgresConnection/pipelined(_:then:)``).
enum Pipelining: Sendable {
    /// A body of several statements: confirmed after its last one.
    case no
    /// One unnamed statement (`query`): sent as it comes.
    case unnamed
    /// One prepared statement: sent as it comes once the connection has prepared it, which the
    /// pool's ``ConnectionScopes`` record notes after its first execution there; the first one
    /// is confirmed after its answer.
    case prepared(ObjectIdentifier)

    /// Whether the confirmation may be written behind the statement on `connection`.
    func applies(record: ConnectionScopes?, connection: PostgresConnection) -> Bool {
        switch self {
        case .no: false
        case .unnamed: true
        case .prepared(let statement): record?.hasPrepared(statement, on: connection) == true
        }
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
    ///
    /// Upstream (docs/upstream.md, "A statement on a closed connection"): seen with PostgresNIO
    /// 1.33.2, whose `query`/`execute` write with `channel.write(…, promise: nil)`, so a statement
    /// written to a closed channel is neither answered nor failed. The check can go when
    /// `Benchmarks/upstream`'s `repro-closed-connection` exits 1 (the statement fails at once)
    /// against a newer release; the request and batch deadlines stay (decision 0015).
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

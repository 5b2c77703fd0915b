import Logging
import PostgresNIO

/// Statements on the pool, each on a connection leased for it alone and given back when its
/// rows are read or it fails (decision 0033). PostgresNIO 1.33's `PostgresClient.query` and
/// `execute` give the connection back when the row stream finishes; a statement that fails
/// after PostgreSQL described its rows (a unique violation in an INSERT … RETURNING: a replayed
/// sign-in; a statement timeout), with the failure arriving before the caller has attached to
/// the stream (its thread preempted between sending and awaiting, under load), finishes a
/// stream nobody listens to, and the connection is never given back. Eight of those and the
/// pool has nothing left: seen under the whole test suite with 2,000 replays of one token.
/// `withConnection` gives the connection back when its closure returns or throws, whatever the
/// stream did. Seen with PostgresNIO 1.33.2: `PSQLRowStream.asyncSequence(onFinish:)`'s
/// `.waitingForConsumer(.failure)` branch finishes the sequence without calling `onFinish`.
/// When that branch calls `onFinish` in a newer release and `Benchmarks/upstream`'s
/// `repro-lease-leak` no longer loses connections (it is a race: exit 1 is "not reproduced"),
/// this reason goes; the lease by scope stays, since the tenant scope and the commit
/// confirmation need one connection for several statements (docs/upstream.md, "Lease leak").
/// Each statement runs in the task's ``TenantScope``, and one that may write
/// (``StatementEffect``) returns its rows only once they are committed (decision 0056).
extension PostgresClient {
    /// The rows of `query`, read in full.
    func rows(_ query: PostgresQuery, logger: Logger, function: String = #function) async throws -> [PostgresRow] {
        try await StatementSpan.around(sql: query.sql, function: function) {
            try await withScopedStatement(writes: StatementEffect.mayWrite(query.sql), pipelining: .unnamed, logger: logger) { connection in
                try await connection.query(query, logger: logger).collect()
            }
        }
    }

    /// The rows of the prepared `statement` (prepared once per connection), read in full; sent
    /// unnamed instead when the pool's connections prepare nothing
    /// (`BROKER_DB_PREPARED_STATEMENTS=unnamed`, decision 0086).
    func rows<Statement: PostgresPreparedStatement>(_ statement: Statement, logger: Logger, function: String = #function) async throws
        -> [Statement.Row]
    where Statement.Row: Sendable {
        let record = ConnectionScopes.of(self)
        let unnamed =
            record?.namedStatements == false ? PostgresQuery(unsafeSQL: Statement.sql, binds: try statement.makeBindings()) : nil
        return try await StatementSpan.around(sql: Statement.sql, function: function) {
            try await withScopedStatement(
                record: record, writes: StatementEffect.mayWrite(Statement.self),
                pipelining: unnamed == nil ? .prepared(ObjectIdentifier(Statement.self)) : .unnamed, logger: logger
            ) { connection in
                guard let unnamed else { return try await connection.collect(statement, logger: logger) }
                return try await connection.query(unnamed, logger: logger).collect().map(statement.decodeRow)
            }
        }
    }

    /// `withConnection`, the connection given the task's ``TenantScope`` for its session first,
    /// for a body of transactions (an import's batches). When the scope is set per transaction
    /// (``ConnectionScopes/perTransaction``) it is not: through a pooler in transaction mode the
    /// session is a server connection other clients share, and each transaction of the body
    /// sets its own (``PostgresConnection/setTransactionTenantScope(_:settings:logger:)``).
    func withScopedConnection<Result: Sendable>(
        logger: Logger, isolation: isolated (any Actor)? = #isolation, _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        let record = ConnectionScopes.of(self)
        return try await withOpenConnection(isolation: isolation) { connection in
            if record?.perTransaction != true {
                try await Self.enterTenantScope(on: connection, TenantScope.current, record: record, logger: logger)
            }
            return try await body(connection)
        }
    }
}

extension PostgresConnection {
    /// The rows of the prepared `statement`, read in full.
    func collect<Statement: PostgresPreparedStatement>(_ statement: Statement, logger: Logger) async throws -> [Statement.Row]
    where Statement.Row: Sendable {
        var rows: [Statement.Row] = []
        for try await row in try await execute(statement, logger: logger) { rows.append(row) }
        return rows
    }
}

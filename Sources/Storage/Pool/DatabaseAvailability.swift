import PostgresNIO
import _ConnectionPoolModule

extension Error {
    /// Whether this failure means the database cannot serve now (down, restarting, dropping
    /// connections, out of connections, or a statement that ran out of time), as opposed to a
    /// fault in what was asked. Such failures are answered 503 `database_unavailable` with
    /// `Retry-After` (decision 0015), never 500.
    public var isDatabaseUnavailable: Bool {
        // The pool's own failures: its circuit breaker (a minute of failed connection
        // attempts), a pool shut down while replaced, a cancelled wait for a connection.
        if self is ConnectionPoolError || (self as? PostgresTransactionError)?.closureError is ConnectionPoolError {
            return true
        }
        if self is DatabaseConnectFailure || self is CommitUnconfirmed || self is ConnectionClosedBeforeUse { return true }
        guard let error = postgresError else { return self is DatabaseDeadlineExceeded }
        switch error.code {
        case .server:
            // 57014 query_canceled (statement_timeout), 57P01–57P05 shutdown and restarts,
            // class 08 connection exceptions, 53 insufficient resources (too many connections),
            // 25006 read_only_sql_transaction: the broker never asks for a read-only
            // transaction, so a write refused as read-only met a standby not yet promoted (a
            // failover in progress, decision 0088) or a database an operator made read-only.
            guard let state = error.sqlState else { return false }
            return state == "57014" || state.hasPrefix("57P") || state.hasPrefix("08") || state.hasPrefix("53") || state == "25006"
        case .queryCancelled, .clientClosedConnection, .serverClosedConnection, .connectionError, .uncleanShutdown,
            .poolClosed, .sslUnsupported, .failedToAddSSLHandler:
            return true
        default:
            return false
        }
    }
}

/// A database call did not answer within its deadline.
public struct DatabaseDeadlineExceeded: Error, Sendable, CustomStringConvertible {
    public init() {}
    public var description: String { "the database did not answer in time" }
}

extension Error {
    /// Whether PostgreSQL refused a value the request carried: a character its text cannot
    /// hold (NUL, 22021), a string too long for its column (22001), or another data
    /// exception of class 22. The request is at fault (400), not the broker (500); nothing
    /// was written.
    public var isRefusedRequestValue: Bool {
        guard let state = postgresError?.sqlState else { return false }
        return state.hasPrefix("22")
    }
}

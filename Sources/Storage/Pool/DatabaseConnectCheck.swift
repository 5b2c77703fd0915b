import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO

/// Why the broker could not connect to its database, as a meaning: the CLI words it with a hint.
public enum DatabaseConnectFailure: Error, Sendable, Equatable {
    /// Nothing accepts connections there (refused, or no socket file).
    case refused(endpoint: String)
    /// The host name does not resolve.
    case hostNotFound(host: String)
    /// PostgreSQL answered: no database of that name.
    case noSuchDatabase(name: String, endpoint: String)
    /// PostgreSQL refused the user or password.
    case authenticationFailed(user: String, endpoint: String)
    /// The server accepts only TLS connections, and TLS is off.
    case tlsRequired(endpoint: String)
    /// TLS is required, and the server does not offer it.
    case tlsUnsupported(endpoint: String)
    /// No answer within the connect timeout.
    case timedOut(endpoint: String, seconds: Int)
    /// PostgreSQL is starting up, shutting down or in recovery (SQLSTATE 57P0x): its message.
    case notAccepting(endpoint: String, reason: String)
    /// A pooler in front of PostgreSQL refused a setting the broker's connections start with
    /// (PgBouncer: "unsupported startup parameter: statement_timeout").
    case startupParameterRefused(endpoint: String, parameter: String)
    /// PostgreSQL refused for another reason (its message), or the connection failed otherwise.
    case other(endpoint: String, reason: String)
}

/// Opens one connection (outside every pool), proves it with the startup handshake, and closes
/// it: the check every command and `broker serve` make before using the database, and how
/// ``DatabasePool`` learns that the database is back. Bounded by `timeout` as a whole.
public enum DatabaseConnectCheck {
    public static func check(_ configuration: DatabaseConfiguration, timeout: Duration, logger: Logger)
        async throws(DatabaseConnectFailure)
    {
        let endpoint = configuration.endpointDescription
        var connectionConfiguration: PostgresConnection.Configuration
        do {
            connectionConfiguration = try configuration.connectionConfiguration()
        } catch {
            throw .other(endpoint: endpoint, reason: "its TLS settings could not be made (\(error))")
        }
        var configuration = configuration
        configuration.connectTimeout = timeout
        connectionConfiguration.options.connectTimeout = .nanoseconds(Int64(timeout.components.seconds) * 1_000_000_000)
        var quiet = logger
        quiet.logLevel = .critical
        let settings = connectionConfiguration
        let connectLogger = quiet
        do {
            try await withDatabaseDeadline(timeout) {
                let connection = try await PostgresConnection.connect(
                    configuration: settings, id: 0, logger: connectLogger)
                try? await connection.close()
            }
        } catch is DatabaseDeadlineExceeded {
            throw .timedOut(endpoint: endpoint, seconds: Int(timeout.components.seconds))
        } catch {
            throw classify(error, configuration: configuration)
        }
    }

    static func classify(_ error: any Error, configuration: DatabaseConfiguration) -> DatabaseConnectFailure {
        let endpoint = configuration.endpointDescription
        guard let error = error as? PSQLError else {
            return .other(endpoint: endpoint, reason: String(describing: error))
        }
        switch error.code {
        case .server:
            let state = error.serverInfo?[.sqlState] ?? ""
            let message = error.serverInfo?[.message] ?? ""
            switch state {
            case "3D000": return .noSuchDatabase(name: configuration.database, endpoint: endpoint)
            case let state where state.hasPrefix("57P"): return .notAccepting(endpoint: endpoint, reason: String(message.prefix(200)))
            case "28P01": return .authenticationFailed(user: configuration.username, endpoint: endpoint)
            case "08P01" where message.hasPrefix("unsupported startup parameter: "):
                return .startupParameterRefused(
                    endpoint: endpoint, parameter: String(message.dropFirst("unsupported startup parameter: ".count).prefix(64)))
            case "28000":
                // pg_hba.conf: "no pg_hba.conf entry for host …, no encryption" when only
                // hostssl lines match the client.
                if configuration.tlsMode == .disable, message.contains("no encryption") || message.contains("SSL off") {
                    return .tlsRequired(endpoint: endpoint)
                }
                return .authenticationFailed(user: configuration.username, endpoint: endpoint)
            default:
                return .other(endpoint: endpoint, reason: "PostgreSQL refused (\(state)): \(message.prefix(200))")
            }
        case .sslUnsupported:
            return .tlsUnsupported(endpoint: endpoint)
        case .connectionError:
            if case .connectTimeout? = error.underlying as? ChannelError {
                return .timedOut(endpoint: endpoint, seconds: Int(configuration.connectTimeout.components.seconds))
            }
            return classify(underlying: error.underlying, endpoint: endpoint)
        default:
            return .other(endpoint: endpoint, reason: "\(error.code)")
        }
    }

    private static func classify(underlying: (any Error)?, endpoint: String) -> DatabaseConnectFailure {
        guard let underlying else { return .refused(endpoint: endpoint) }
        if let error = underlying as? IOError, [ECONNREFUSED, ENOENT, ECONNRESET, EHOSTUNREACH, ENETUNREACH].contains(error.errnoCode) {
            return .refused(endpoint: endpoint)
        }
        if let error = underlying as? NIOConnectionError {
            if error.dnsAAAAError != nil || error.dnsAError != nil, error.connectionErrors.isEmpty {
                return .hostNotFound(host: error.host)
            }
            return .refused(endpoint: endpoint)
        }
        if underlying is ChannelError { return .refused(endpoint: endpoint) }
        return .other(endpoint: endpoint, reason: String(describing: underlying))
    }
}

extension DatabaseConnectFailure {
    /// Whether the database itself is out of reach (down, starting, not answering), as opposed
    /// to refusing this client (a missing database, a wrong password, too many clients).
    public var isOutage: Bool {
        switch self {
        case .refused, .hostNotFound, .timedOut, .notAccepting: true
        case .noSuchDatabase, .authenticationFailed, .tlsRequired, .tlsUnsupported, .startupParameterRefused, .other: false
        }
    }
}

extension DatabaseConfiguration {
    /// Where the database is, for messages: `host:port` or the socket file.
    public var endpointDescription: String {
        switch endpoint {
        case .tcp(let host, let port): "\(host):\(port)"
        case .unixSocket(let path): path
        }
    }
}

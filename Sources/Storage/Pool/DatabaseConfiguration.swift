import Foundation
import NIOSSL
import PostgresNIO

/// Where the broker's PostgreSQL is, parsed from a `DATABASE_URL`:
/// `postgres://user:password@host:5432/db?sslmode=require` over TCP, or
/// `postgres:///db?host=/path/to/socket/dir&user=name` over a unix socket.
public struct DatabaseConfiguration: Sendable, CustomStringConvertible {
    public enum Endpoint: Sendable, Equatable {
        case tcp(host: String, port: Int)
        case unixSocket(path: String)
    }

    public enum TLSMode: String, Sendable {
        case disable, prefer, require
        case verifyFull = "verify-full"
    }

    public var endpoint: Endpoint
    public var username: String
    public var password: String?
    public var database: String
    public var tlsMode: TLSMode
    public var maxConnections: Int
    /// The longest a statement may run (`statement_timeout` of every connection;
    /// `BROKER_DB_STATEMENT_TIMEOUT`). A statement that runs out fails, and the broker answers
    /// 503 `database_unavailable`.
    public var statementTimeout: Duration = .seconds(5)
    /// The longest opening a connection may take (`BROKER_DB_CONNECT_TIMEOUT`).
    public var connectTimeout: Duration = .seconds(10)
    /// Sign-ins (quiet, first, known), refresh rotations and Apple's notifications (email,
    /// consent revoked, account deleted) are written in batches: each of those seven batchers
    /// runs at most this many batch statements at once (`BROKER_DB_SIGN_IN_BATCHES`, decisions
    /// 0030, 0074); 0 writes each in a statement of its own.
    public var batchStatementsAtOnce: Int = 2
    /// Where each statement's tenant scope is set (`BROKER_DB_TENANT_SCOPE`, decision 0055):
    /// false, on the connection when it changes (no round trip while a connection serves one
    /// tenant; needs a connection of its own, or a pooler in session mode); true, inside a
    /// transaction around every statement (`set_config(…, true)`), for a pooler in transaction
    /// mode, at two more statements and three more round trips for a statement on its own.
    public var tenantScopePerTransaction = false
    /// Whether the statements that are ``PostgresPreparedStatement``s are prepared once per
    /// connection (`BROKER_DB_PREPARED_STATEMENTS=named`, the default) or sent unnamed, parsed
    /// with every execution (`unnamed`: behind a pooler in transaction mode that cannot carry
    /// named prepared statements, such as PgBouncer before 1.21; decision 0086).
    public var namedStatements = true
    /// Where the work that holds a session connects (`BROKER_DB_SESSION_URL`, decision 0086):
    /// the cache invalidations' LISTEN, the migration lock and an import job's lock. Nil: here.
    public var sessionTarget: DatabaseConfiguration? {
        get { sessionBox?.configuration }
        set { sessionBox = newValue.map(SessionBox.init) }
    }
    private var sessionBox: SessionBox?
    private final class SessionBox: Sendable {
        let configuration: DatabaseConfiguration
        init(_ configuration: DatabaseConfiguration) { self.configuration = configuration }
    }

    /// Where the work that holds a session connects: ``sessionTarget``, or this configuration.
    /// Its connections send no startup parameters (``sessionSettings``): they listen, lock and
    /// migrate (which sets its own statement timeout), and a pooler in session mode in front
    /// of them would refuse them (PgBouncer: "unsupported startup parameter").
    public var forSessionWork: DatabaseConfiguration {
        var session = sessionTarget ?? self
        session.sessionBox = nil
        session.startsWithSettings = false
        return session
    }

    /// Whether connections send ``sessionSettings`` as startup parameters. Per transaction
    /// (``tenantScopePerTransaction``) they do not: each transaction sets them with its scope
    /// (``transactionSettings``), since a pooler in transaction mode refuses startup parameters
    /// it does not know and would not carry them to the server connection a statement runs on.
    private var startsWithSettings = true

    /// Session settings the broker's statements run under: the statement timeout, no JIT
    /// compilation (decision 0072: the broker's statements run in a millisecond, and a
    /// statement whose estimated cost passes `jit_above_cost` spent seconds compiling), and
    /// generic plans always (decision 0075: every statement reaches its rows through keys bound
    /// to values, decision 0014, and PostgreSQL's own choice, `auto`, took to planning the
    /// sign-in statements again on every execution after an `ANALYZE`).
    var sessionSettings: [(String, String)] {
        let milliseconds =
            statementTimeout.components.seconds * 1_000
            + statementTimeout.components.attoseconds / 1_000_000_000_000_000
        return [("statement_timeout", "\(milliseconds)"), ("jit", "off"), ("plan_cache_mode", "force_generic_plan")]
    }

    /// The settings each connection starts with: ``sessionSettings`` on a connection that keeps
    /// its scope, none otherwise.
    var startupParameters: [(String, String)] {
        startsWithSettings && !tenantScopePerTransaction ? sessionSettings : []
    }

    /// The settings a transaction sets beside its tenant scope (decision 0086):
    /// ``sessionSettings`` when the scope is set per transaction, none when the connection
    /// started with them.
    var transactionSettings: [(String, String)] {
        tenantScopePerTransaction ? sessionSettings : []
    }

    public init(
        endpoint: Endpoint, username: String, password: String? = nil, database: String,
        tlsMode: TLSMode = .disable, maxConnections: Int = 16
    ) {
        self.endpoint = endpoint
        self.username = username
        self.password = password
        self.database = database
        self.tlsMode = tlsMode
        self.maxConnections = maxConnections
    }

    public init(url string: String, maxConnections: Int = 16) throws(StorageError) {
        guard let components = URLComponents(string: string),
            let scheme = components.scheme, ["postgres", "postgresql"].contains(scheme)
        else {
            throw .configuration(
                "DATABASE_URL must look like postgres://user:password@host:5432/database (or postgres:///database?host=/socket/dir)."
            )
        }
        let query = Dictionary(
            (components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { _, last in last })
        let database = String(components.path.drop { $0 == "/" })
        let socketHost = query["host"].flatMap { $0.hasPrefix("/") ? $0 : nil }
        let host = components.host.flatMap { $0.isEmpty ? nil : $0 }
        let username = components.user ?? query["user"] ?? "postgres"
        let password = components.password ?? query["password"]
        if let socketDir = socketHost ?? (host == nil ? "/var/run/postgresql" : nil) {
            let port = components.port ?? query["port"].flatMap(Int.init) ?? 5432
            self.endpoint = .unixSocket(path: "\(socketDir)/.s.PGSQL.\(port)")
        } else if let host {
            self.endpoint = .tcp(host: host, port: components.port ?? 5432)
        } else {
            throw .configuration("DATABASE_URL names no host.")
        }
        let defaultTLS: TLSMode = if case .tcp = endpoint { .prefer } else { .disable }
        guard let tls = TLSMode(rawValue: query["sslmode"] ?? defaultTLS.rawValue) else {
            throw .configuration("DATABASE_URL sslmode must be disable, prefer, require or verify-full.")
        }
        self.username = username.removingPercentEncoding ?? username
        self.password = password.map { $0.removingPercentEncoding ?? $0 }
        self.database = database.isEmpty ? self.username : database
        self.tlsMode = tls
        self.maxConnections = maxConnections
    }

    /// The configuration without the password, for logs and status output.
    public var description: String {
        switch endpoint {
        case .tcp(let host, let port): "postgres://\(username)@\(host):\(port)/\(database)"
        case .unixSocket(let path): "postgres://\(username)@unix(\(path))/\(database)"
        }
    }

    /// The TLS settings of `tlsMode` over TCP and whether TLS is required; nil when disabled.
    /// `prefer` and `require` encrypt without verifying the certificate (as libpq's modes do);
    /// `verify-full` verifies it and the host name.
    private var tlsSettings: (TLSConfiguration, required: Bool)? {
        switch tlsMode {
        case .disable:
            return nil
        case .prefer, .require:
            var settings = TLSConfiguration.makeClientConfiguration()
            settings.certificateVerification = .none
            return (settings, tlsMode == .require)
        case .verifyFull:
            return (TLSConfiguration.makeClientConfiguration(), true)
        }
    }

    /// One connection of its own, outside the pool (the LISTEN connection of decision 0015).
    public func connectionConfiguration() throws -> PostgresConnection.Configuration {
        var configuration: PostgresConnection.Configuration
        switch endpoint {
        case .unixSocket(let path):
            configuration = .init(unixSocketPath: path, username: username, password: password, database: database)
        case .tcp(let host, let port):
            let tls: PostgresConnection.Configuration.TLS =
                switch tlsSettings {
                case nil: .disable
                case let (settings, required)?:
                    required ? .require(try NIOSSLContext(configuration: settings)) : .prefer(try NIOSSLContext(configuration: settings))
                }
            configuration = .init(host: host, port: port, username: username, password: password, database: database, tls: tls)
        }
        configuration.options.additionalStartupParameters = startupParameters
        configuration.options.connectTimeout = .nanoseconds(Int64(connectTimeout.components.seconds) * 1_000_000_000)
        return configuration
    }

    public func clientConfiguration() throws -> PostgresClient.Configuration {
        var configuration: PostgresClient.Configuration
        switch endpoint {
        case .unixSocket(let path):
            configuration = .init(unixSocketPath: path, username: username, password: password, database: database)
            // No keep-alive queries over a Unix socket (decision 0030): nothing between the
            // broker and PostgreSQL can drop an idle one, and a server that goes away closes it.
            configuration.options.keepAliveBehavior = nil
        case .tcp(let host, let port):
            let tls: PostgresClient.Configuration.TLS =
                switch tlsSettings {
                case nil: .disable
                case let (settings, required)?: required ? .require(settings) : .prefer(settings)
                }
            configuration = .init(
                host: host, port: port, username: username, password: password, database: database, tls: tls)
        }
        configuration.options.maximumConnections = maxConnections
        // No connections kept open below the maximum (decision 0022): PostgresNIO 1.33.2's pool
        // stops the process on `precondition(minimumConcurrentConnections <= stats.active)`
        // (`createNewDemandConnectionIfPossible`) when a lease arrives while fewer than the
        // minimum are up, as after a PostgreSQL restart under load. A minimum may be tried again
        // when that precondition is gone from `PoolStateMachine+ConnectionGroup.swift` in a newer
        // release (docs/upstream.md, "The pool's minimum connections").
        configuration.options.minimumConnections = 0
        configuration.options.connectTimeout = connectTimeout
        configuration.options.additionalStartupParameters = startupParameters
        return configuration
    }
}

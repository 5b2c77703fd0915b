import Storage

/// What the CLI says when it cannot connect to the database: the cause, and what to do.
struct DatabaseConnectExplanation {
    let code: String
    let message: String
    let hint: String

    init(_ failure: DatabaseConnectFailure) {
        switch failure {
        case .refused(let endpoint):
            code = "database_unreachable"
            message = "Connection refused at \(endpoint): no PostgreSQL is accepting connections there."
            hint = "Start PostgreSQL, or point DATABASE_URL at the host and port (or socket folder) it listens on."
        case .hostNotFound(let host):
            code = "database_host_not_found"
            message = "The database host '\(host)' does not resolve."
            hint = "Check the host name in DATABASE_URL."
        case .noSuchDatabase(let name, let endpoint):
            code = "database_not_found"
            message = "PostgreSQL at \(endpoint) has no database '\(name)'."
            hint = "Create it (createdb \(name)), or name an existing one in DATABASE_URL."
        case .authenticationFailed(let user, let endpoint):
            code = "database_authentication_failed"
            message = "PostgreSQL at \(endpoint) refused user '\(user)': authentication failed."
            hint = "Check the user and password in DATABASE_URL (percent-encode special characters) and pg_hba.conf."
        case .tlsRequired(let endpoint):
            code = "database_tls_required"
            message = "PostgreSQL at \(endpoint) accepts only TLS connections, and DATABASE_URL turns TLS off."
            hint = "Use sslmode=require (or verify-full) in DATABASE_URL."
        case .tlsUnsupported(let endpoint):
            code = "database_tls_unsupported"
            message = "DATABASE_URL requires TLS, and PostgreSQL at \(endpoint) does not offer it."
            hint = "Turn on ssl in postgresql.conf, or use sslmode=prefer or disable in DATABASE_URL."
        case .timedOut(let endpoint, let seconds):
            code = "database_connect_timeout"
            message = "No answer from PostgreSQL at \(endpoint) within \(seconds) s."
            hint =
                "Check that the host and port in DATABASE_URL reach PostgreSQL (a firewall may drop them); BROKER_DB_CONNECT_TIMEOUT sets the wait."
        case .notAccepting(let endpoint, let reason):
            code = "database_unavailable"
            message = "PostgreSQL at \(endpoint) is not accepting connections: \(reason)"
            hint = "Wait until PostgreSQL has started (or finished its recovery), then run the command again."
        case .startupParameterRefused(let endpoint, let parameter):
            code = "database_pooler_refused_setting"
            message =
                "The pooler at \(endpoint) refused the setting '\(parameter)' the broker's connections start with (the statement timeout, jit and plan_cache_mode)."
            hint =
                "Behind a pooler in transaction mode set BROKER_DB_TENANT_SCOPE=transaction: each transaction then sets them itself. In session mode, set the pooler's ignore_startup_parameters = statement_timeout,jit,plan_cache_mode and put them on the role (docs/scaling.md, \"Connections and PgBouncer\")."
        case .other(let endpoint, let reason):
            code = "database_unavailable"
            message = "Could not connect to PostgreSQL at \(endpoint): \(reason)"
            hint = "Check DATABASE_URL and that PostgreSQL is running; BROKER_LOG_LEVEL=debug shows more."
        }
    }
}

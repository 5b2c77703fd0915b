import BrokerCore
import Logging
import Storage

/// Refuses a database reached through a pooler in transaction mode unless the broker is set up
/// to talk through one (decision 0086): a wrong answer must never come of it. Behind such a
/// pooler a session is a server connection other clients share, so the tenant scope must be set
/// per transaction, named prepared statements must be carried by the pooler or not used, and
/// the work that holds a session (LISTEN, the migration and import locks) must connect
/// elsewhere.
enum PoolerRefusal {
    static func check(_ configuration: DatabaseConfiguration, logger: Logger) async throws {
        let finding = try await PoolerCheck.check(configuration, logger: logger)
        guard finding.sharesServerConnections else {
            if configuration.sessionTarget != nil { try await checkSession(configuration.forSessionWork, logger: logger) }
            return
        }
        let found = "DATABASE_URL (\(configuration)) reaches PostgreSQL through a pooler in transaction mode"
        guard configuration.tenantScopePerTransaction else {
            throw BrokerError(
                code: "pooler_needs_transaction_scope", kind: .invalidInput, title: "Pooler in transaction mode",
                detail: "\(found): two of the broker's connections shared one server connection. The tenant scope kept "
                    + "on each connection would then reach another client's statements.",
                hint: "Set BROKER_DB_TENANT_SCOPE=transaction (and see docs/scaling.md, \"Connections and PgBouncer\"), "
                    + "or use the pooler's session mode.")
        }
        if configuration.namedStatements, finding.carriesNamedStatements != true {
            throw BrokerError(
                code: "pooler_drops_prepared_statements", kind: .invalidInput, title: "Pooler does not carry prepared statements",
                detail: "\(found), and a statement prepared on one connection "
                    + (finding.carriesNamedStatements == false
                        ? "was missing (or already there) on the server connection the pooler gave that connection next."
                        : "could not be shown to survive a move to another server connection (the pool has one)."),
                hint: "Set BROKER_DB_PREPARED_STATEMENTS=unnamed, or run PgBouncer 1.21 or later with max_prepared_statements = 100.")
        }
        guard configuration.sessionTarget != nil else {
            throw BrokerError(
                code: "pooler_needs_session_url", kind: .invalidInput, title: "No session URL behind a pooler",
                detail: "\(found). The cache invalidations' LISTEN, the migration lock and import locks need a session "
                    + "of their own, which no connection through it keeps.",
                hint: "Set BROKER_DB_SESSION_URL to PostgreSQL directly, or to a pool of the pooler in session mode.")
        }
        try await checkSession(configuration.forSessionWork, logger: logger)
    }

    /// `session`: where the work that holds a session connects (as it connects).
    private static func checkSession(_ session: DatabaseConfiguration, logger: Logger) async throws {
        guard try await PoolerCheck.check(session, logger: logger).sharesServerConnections else { return }
        throw BrokerError(
            code: "pooler_session_url_shared", kind: .invalidInput, title: "Session URL behind a pooler in transaction mode",
            detail: "BROKER_DB_SESSION_URL (\(session)) reaches PostgreSQL through a pooler in transaction mode, "
                + "where LISTEN and session locks do not hold.",
            hint: "Point BROKER_DB_SESSION_URL at PostgreSQL directly, or at a pool of the pooler in session mode.")
    }
}

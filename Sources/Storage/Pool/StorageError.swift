import BrokerCore
/// Failures of the storage layer that an operator must act on.
public enum StorageError: Error, Sendable, Equatable, CustomStringConvertible {
    case configuration(String)
    case migration(String)
    case embeddedPostgres(String)
    /// A migration is pending and this database role may not change the schema (the role that
    /// serves, decision 0055).
    case migrationNotPermitted(String)

    public var description: String {
        switch self {
        case .configuration(let message), .migration(let message), .embeddedPostgres(let message), .migrationNotPermitted(let message):
            message
        }
    }
}

/// A write refused because what it would create exists already, as a meaning: the admin layer
/// words it for the CLI and the API.
public enum StorageConflict: Error, Sendable, Equatable {
    /// A tenant with this slug exists.
    case tenantExists(TenantSlug)
    /// The tenant has this Apple client id already (a client id belongs to one group only).
    case appleClientExists(clientID: String)
}

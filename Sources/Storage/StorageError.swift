/// Failures of the storage layer that an operator must act on.
public enum StorageError: Error, Sendable, Equatable, CustomStringConvertible {
    case configuration(String)
    case migration(String)
    case embeddedPostgres(String)

    public var description: String {
        switch self {
        case .configuration(let message), .migration(let message), .embeddedPostgres(let message): message
        }
    }
}

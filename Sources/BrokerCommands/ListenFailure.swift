import BrokerApplication
import BrokerCore
import NIOCore

#if canImport(Glibc)
    import Glibc
#endif

/// A socket that could not be opened for listening, said with the address and the setting that
/// moves it (the raw error says only "Address already in use").
enum ListenFailure {
    /// `error` as a ``BrokerError`` naming `address` and `setting` when it is a bind failure;
    /// otherwise `error` itself.
    static func explain(_ error: any Error, address: String, setting: String) -> any Error {
        guard let io = error as? IOError else { return error }
        switch io.errnoCode {
        case EADDRINUSE:
            return BrokerError(
                code: "address_in_use", kind: .unavailable, title: "Address in use",
                detail: "Cannot listen on \(address): another process is using it.",
                hint: "Stop that process, or choose another port with \(setting).")
        case EACCES:
            return BrokerError(
                code: "address_not_permitted", kind: .unavailable, title: "Address not permitted",
                detail: "Cannot listen on \(address): permission denied (ports below 1024 need privileges).",
                hint: "Choose a port above 1023 with \(setting).")
        case EADDRNOTAVAIL:
            return BrokerError(
                code: "address_unavailable", kind: .unavailable, title: "Address unavailable",
                detail: "Cannot listen on \(address): no interface of this machine has that address.",
                hint: "Set \(setting) to an address of this machine (127.0.0.1, 0.0.0.0).")
        default:
            return error
        }
    }
}

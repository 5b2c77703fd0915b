import Foundation
import Synchronization

/// Faults the mock can be told to show, so that tests see what the broker does when Apple
/// misbehaves: its key endpoint down, empty or malformed, and token answers that leave out or
/// bend what the broker must check.
extension MockAppleIdP {
    /// How `/auth/keys` answers.
    public enum KeysFault: Sendable, Equatable {
        /// The published keys (no fault).
        case none
        /// 503 with no body, as when Apple is down.
        case unavailable
        /// 200 with `{"keys": []}`.
        case emptySet
        /// 200 with a body that is not a key set.
        case malformed
    }

    /// How `/auth/token` answers a code exchange.
    public enum TokenFault: Sendable, Equatable {
        /// Access, refresh and id token (no fault).
        case none
        /// A refresh token but no `id_token`.
        case omitIDToken
        /// An `id_token` for another subject than the code's.
        case otherSubject
    }

    public var keysFault: KeysFault {
        get { faults.withLock { $0.keys } }
        set { faults.withLock { $0.keys = newValue } }
    }

    public var tokenFault: TokenFault {
        get { faults.withLock { $0.token } }
        set { faults.withLock { $0.token = newValue } }
    }

    /// How many times `/auth/keys` was asked.
    public var keyFetches: Int { faults.withLock { $0.keyFetches } }

    /// Authorization codes redeemed at `/auth/token` (successfully or not).
    public var codeExchanges: Int { faults.withLock { $0.codeExchanges } }

    /// The `/auth/keys` answer: status and body.
    public func keysAnswer() throws -> (status: Int, body: Data) {
        let fault = faults.withLock { faults in
            faults.keyFetches += 1
            return faults.keys
        }
        switch fault {
        case .none: return (200, try jwksJSON())
        case .unavailable: return (503, Data())
        case .emptySet: return (200, Data(#"{"keys":[]}"#.utf8))
        case .malformed: return (200, Data(#"<html>maintenance</html>"#.utf8))
        }
    }

    func countCodeExchange() { faults.withLock { $0.codeExchanges += 1 } }
}

struct MockFaults: Sendable {
    var keys: MockAppleIdP.KeysFault = .none
    var token: MockAppleIdP.TokenFault = .none
    var keyFetches = 0
    var codeExchanges = 0
}

import Foundation
import Synchronization

/// Faults the mock can be told to show, so that tests see what the broker does when Apple
/// misbehaves: its key endpoint down, empty or malformed, and token answers that leave out or
/// bend what the broker must check.
extension MockAppleIdP {
    /// How `/auth/token` answers a code exchange.
    public enum TokenFault: Sendable, Equatable {
        /// Access, refresh and id token (no fault).
        case none
        /// A refresh token but no `id_token`.
        case omitIDToken
        /// An `id_token` for another subject than the code's.
        case otherSubject
        /// Exactly this answer, whatever the request (a mutated body, any status).
        case answer(status: Int, body: Data)
        /// The head at once, then a body one byte a second (the whole answer takes minutes).
        case slowBody
    }

    public var tokenFault: TokenFault {
        get { faults.withLock { $0.token } }
        set { faults.withLock { $0.token = newValue } }
    }

    /// The status `/auth/revoke` answers with (nil: as Apple does).
    public var revokeFault: Int? {
        get { faults.withLock { $0.revokeStatus } }
        set { faults.withLock { $0.revokeStatus = newValue } }
    }

    /// Calls to `/auth/revoke`, answered or refused.
    public var revokeCalls: Int { faults.withLock { $0.revokeCalls } }

    /// Authorization codes redeemed at `/auth/token` (successfully or not).
    public var codeExchanges: Int { faults.withLock { $0.codeExchanges } }

    func countCodeExchange() { faults.withLock { $0.codeExchanges += 1 } }
}

struct MockFaults: Sendable {
    var token: MockAppleIdP.TokenFault = .none
    var codeExchanges = 0
    var revokeStatus: Int?
    var revokeCalls = 0
}

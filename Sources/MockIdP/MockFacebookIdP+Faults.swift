import Foundation
import Synchronization

/// Faults the Facebook mock can be told to show: Limited Login's key set down, empty or
/// malformed; Graph failing, dropping the connection, never answering, answering slowly or
/// with any body, or `/me` naming another user than the token's.
extension MockFacebookIdP {
    /// How a Graph endpoint (`debug_token` or `/me`) answers.
    public enum GraphFault: Sendable, Equatable {
        /// Graph's answer (no fault).
        case none
        /// 500 with Graph's transient error body (code 2).
        case internalError
        /// 503 with Graph's "service temporarily unavailable" body.
        case unavailable
        /// The connection is reset (RST) without an answer.
        case resetConnection
        /// No answer until the fault is lifted (then the normal answer), the request is
        /// cancelled, or ten minutes pass (then the connection is closed).
        case hang
        /// The normal answer, but naming another user: `/me`'s `id`, or `debug_token`'s
        /// `user_id`, is "1" followed by the token's user id.
        case otherUser
        /// Exactly this answer: a mutated body (numbers out of range, wrong types, deep
        /// nesting, invalid UTF-8) with any status.
        case answer(status: Int, body: Data)
        /// The head at once, then a body one byte a second (the whole answer takes minutes).
        case slowBody
    }

    public var debugTokenFault: GraphFault {
        get { graph.withLock { $0.debugTokenFault } }
        set { graph.withLock { $0.debugTokenFault = newValue } }
    }

    public var meFault: GraphFault {
        get { graph.withLock { $0.meFault } }
        set { graph.withLock { $0.meFault = newValue } }
    }

    /// Requests received at `debug_token` (a hanging request counts once).
    public var debugTokenCalls: Int { graph.withLock { $0.debugTokenCalls } }

    /// Requests received at `/me` (a hanging request counts once).
    public var meCalls: Int { graph.withLock { $0.meCalls } }
}

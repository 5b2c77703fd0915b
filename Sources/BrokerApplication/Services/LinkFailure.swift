import BrokerCore
import Foundation

/// Why a link or unlink changed nothing, as a meaning (``LinkProblems`` words it for HTTP).
package enum LinkFailure: Error, Sendable, Equatable {
    /// `X-Account-Token` is missing, malformed, expired, of a revoked session, of another
    /// account or of another tenant.
    case invalidAccountToken
    /// The tenant has no such account.
    case accountNotFound
    /// The account is disabled or deleted.
    case accountDisabled
    /// Another account holds the identity.
    case identityAlreadyLinked(accountID: UUID)
    /// The account has no such identity.
    case identityNotFound
    /// The identity is the account's only way in.
    case lastIdentity
}

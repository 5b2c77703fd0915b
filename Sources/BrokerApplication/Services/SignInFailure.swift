import BrokerCore

/// Why a verified proof opened no session, as a meaning (the HTTP problem mapping words it).
package enum SignInFailure: Error, Sendable, Equatable {
    /// No provider of that name is registered.
    case unknownProvider(String)
    /// The identity has no account and the intent was `sign_in`; nothing was created.
    case accountNotFound(ProviderID)
    /// The identity's account is disabled or deleted.
    case accountDisabled
    /// The proof opened a session before (decision 0018).
    case tokenReplayed
}

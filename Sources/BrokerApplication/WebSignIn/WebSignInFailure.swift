import BrokerCore

/// Why a web sign-in could not start or its broker code could not be exchanged, as a meaning:
/// the HTTP edge words it (400 with the code named here).
package enum WebSignInFailure: Error, Sendable, Equatable {
    /// `web_flow_not_supported`: the provider's type has no web flow, or the tenant has not
    /// turned it on (an Apple Services ID with a return URL; `--client-secret-file`).
    case notSupported(ProviderID)
    /// `unknown_client`: the client is not the tenant's web client of the provider; `candidates`
    /// when none was named and several could be meant.
    case unknownClient(ProviderID, clientID: String?, candidates: [String])
    /// `return_url_not_registered`.
    case returnURLNotRegistered(ProviderID, clientID: String)
    /// `invalid_grant`: the broker code is unknown, used, expired, or another tenant's or
    /// provider's.
    case invalidGrant
}

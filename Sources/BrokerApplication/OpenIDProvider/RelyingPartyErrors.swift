import BrokerCore
import Foundation

/// What a relying party is told when a sign-in it asked for ends in an error at the provider's
/// callback (decision 0082): one of RFC 6749 §4.1.2.1's codes, which a stock client library
/// knows, and a description that names the broker's own reason (the code the REST API's web
/// flow sends back).
enum RelyingPartyErrors {
    static func authorizationError(forCallbackError error: String) -> AuthorizationError {
        switch error {
        case "access_denied":
            AuthorizationError("access_denied", "The person did not allow the sign-in at the provider.")
        case "temporarily_unavailable", "provider_unavailable":
            AuthorizationError(
                "temporarily_unavailable", "The sign-in could not finish for a moment (\(error)); try again.")
        case "server_error":
            AuthorizationError("server_error", "The sign-in failed on the broker's side.")
        case "account_not_found":
            AuthorizationError("access_denied", "account_not_found: no account is linked to this identity.")
        case "account_disabled":
            AuthorizationError("access_denied", "account_disabled: the account is disabled.")
        case "invalid_token":
            AuthorizationError("access_denied", "invalid_token: the provider's answer did not verify.")
        default:
            AuthorizationError("access_denied", "\(error): the sign-in at the provider did not complete.")
        }
    }
}

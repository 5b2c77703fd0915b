import BrokerApplication
import BrokerCore

/// Link and unlink failures in words: the only place they are worded for HTTP.
enum LinkProblems {
    static func problem(_ failure: LinkFailure) -> BrokerError {
        switch failure {
        case .invalidAccountToken:
            BrokerError(
                code: "invalid_account_token", kind: .unauthenticated, title: "Invalid account token",
                detail: "X-Account-Token must be a current access token of this account (from a live session of it).",
                hint: "Send the access token of the person's current session with this account; sign them in again if it expired.")
        case .accountNotFound:
            BrokerError(code: "account_not_found", kind: .notFound, title: "Account not found", detail: "This tenant has no such account.")
        case .accountDisabled:
            BrokerError(
                code: "account_disabled", kind: .notPermitted, title: "Account not active",
                detail: "The account is disabled or deleted; nothing was linked.")
        case .identityAlreadyLinked(let accountID):
            BrokerError(
                code: "identity_already_linked", kind: .conflict, title: "Identity linked to another account",
                detail: "This identity belongs to account \(accountID.lowercasedString); nothing was merged or moved.",
                hint: "Sign in with this identity to use that account, or unlink it there first.",
                extensions: ["account_id": accountID.lowercasedString])
        case .identityNotFound:
            BrokerError(
                code: "identity_not_found", kind: .notFound, title: "Identity not found",
                detail: "This account has no such identity.", hint: "List the account's identities: GET /v1/accounts/{id}.")
        case .lastIdentity:
            BrokerError(
                code: "last_identity", kind: .conflict, title: "Last way in",
                detail: "This is the account's only identity; unlinking it would leave no way to sign in. Nothing changed.",
                hint: "Link another identity first (POST /v1/accounts/{id}/identities).")
        }
    }
}

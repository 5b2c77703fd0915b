import BrokerApplication
import BrokerCore
import Providers

/// Web sign-in failures in words (400 problem details).
enum WebSignInProblems {
    static func problem(_ failure: WebSignInFailure, tenant: Tenant) -> BrokerError {
        let slug = tenant.slug.rawValue
        switch failure {
        case .notSupported(let provider):
            return BrokerError(
                code: "web_flow_not_supported", kind: .invalidInput, title: "Web flow not supported",
                detail: "\(SignInProblems.displayName(provider)) sign-in cannot start on the web for this tenant; nothing was stored.",
                hint: provider == .apple
                    ? "Register a Services ID with a return URL: broker apple client add --tenant \(slug) --group <primary app id> --client-id <services id> --kind service --redirect-uri <URL> --return-url <URL>"
                    : "Turn the web flow on: broker provider enable \(provider.rawValue) --tenant \(slug) ... --client-secret-file FILE --return-url URL"
            )
        case .unknownClient(let provider, let clientID?, _):
            return BrokerError(
                code: "unknown_client", kind: .invalidInput, title: "Unknown client",
                detail:
                    "'\(clientID.prefix(155))' is not a web client of \(SignInProblems.displayName(provider)) for this tenant; nothing was stored.",
                hint: provider == .apple
                    ? "Name a Services ID registered with --kind service."
                    : "Name the provider's first --client-id, or leave client_id out.")
        case .unknownClient(let provider, nil, let candidates):
            return BrokerError(
                code: "unknown_client", kind: .invalidInput, title: "Client required",
                detail:
                    "This tenant has several web clients of \(SignInProblems.displayName(provider)) (\(candidates.prefix(10).joined(separator: ", ").prefix(300))); say which in client_id. Nothing was stored."
            )
        case .returnURLNotRegistered(let provider, let clientID):
            return BrokerError(
                code: "return_url_not_registered", kind: .invalidInput, title: "Return URL not registered",
                detail:
                    "return_url is not registered for \(SignInProblems.displayName(provider)) client '\(clientID.prefix(155))'; nothing was stored.",
                hint: provider == .apple
                    ? "Register it with the Services ID: broker apple client add ... --return-url <URL>"
                    : "Register it: broker provider enable \(provider.rawValue) --tenant \(slug) ... --return-url <URL>")
        case .invalidGrant:
            return BrokerError(
                code: "invalid_grant", kind: .invalidInput, title: "Invalid code",
                detail: "The code is unknown, used, expired (codes live 60 seconds), or was issued for another tenant or provider.")
        }
    }
}

import BrokerApplication
import BrokerCore
import Logging
import Providers

/// Sign-in failures in words: the problem details (title, detail, hint) of each meaning the
/// providers and the sign-in service throw. The only place they are worded for HTTP.
enum SignInProblems {
    /// A built-in provider by its type's name; an operator's provider by its id (the registry's
    /// rule, ``ProviderRegistry/displayName(of:)``).
    static func displayName(_ provider: ProviderID) -> String { ProviderRegistry.displayName(of: provider) }

    static func problem(_ failure: ProviderFailure, tenant: Tenant) -> BrokerError {
        let slug = tenant.slug.rawValue
        logIfProviderFailed(failure, tenant: tenant)
        switch failure {
        case .notEnabled(let provider):
            return BrokerError(
                code: failure.code, kind: .invalidInput, title: "Provider not enabled",
                detail: "This tenant has not enabled \(displayName(provider)) sign-in; nothing was verified.",
                hint: enableHint(provider, slug: slug))
        case .unknownClient(.apple, let clientID):
            return BrokerError(
                code: failure.code, kind: .unauthenticated, title: "Unknown client",
                detail: "'\(clientID.prefix(155))' is not an Apple client of this tenant.",
                hint:
                    "Register it: broker apple client add --tenant \(slug) --group <primary app id> --client-id \(clientID.prefix(155)) --kind app"
            )
        case .unknownClient(let provider, let clientID):
            return BrokerError(
                code: failure.code, kind: .unauthenticated, title: "Unknown client",
                detail: "'\(clientID.prefix(155))' is not a \(displayName(provider)) client id of this tenant.",
                hint:
                    "Enable it with every client id the tenant uses: broker provider enable \(provider.rawValue) --tenant \(slug) --client-id <ID> [--client-id <ID> ...]"
            )
        case .nonceMissing(let provider):
            return BrokerError(
                code: failure.code, kind: .invalidInput, title: "Nonce required",
                detail: "Provider '\(provider.rawValue)' requires the raw nonce of the sign-in in `nonce`.",
                hint:
                    "Send the raw nonce the app put in the authorization request, or turn the requirement off: broker provider enable \(provider.rawValue) --tenant \(slug) ... without --nonce-required"
            )
        case .nonceRequired(let clientID):
            return BrokerError(
                code: failure.code, kind: .invalidInput, title: "Nonce required",
                detail: "Client '\(clientID)' requires the raw nonce of the sign-in in `nonce`.",
                hint:
                    "Send the raw nonce the app generated (the app passes its SHA-256 to Apple), or turn the requirement off: broker apple client set --tenant \(slug) --client-id \(clientID) --no-nonce-required"
            )
        case .malformedProof(let detail):
            return SignInRoute.contractMismatch(detail)
        case .rejected(let error):
            return BrokerError(code: error.code, kind: .unauthenticated, title: "Identity token rejected", detail: error.message)
        case .unavailable(let provider, .keys):
            let name = displayName(provider)
            return BrokerError(
                code: failure.code, kind: .unavailable, title: "\(name) unreachable",
                detail: "\(name)'s signing keys could not be fetched and none are cached, so the identity token cannot be checked now.",
                hint: "Retry shortly; the broker refetches \(name)'s keys every second until it has them.")
        case .unavailable(let provider, .tokenEndpoint):
            return BrokerError(
                code: failure.code, kind: .unavailable, title: "\(displayName(provider)) unreachable",
                detail: "\(displayName(provider))'s token endpoint could not be reached.",
                hint: "Retry later; check outbound HTTPS to \(displayName(provider)).")
        case .unavailable(let provider, .discovery):
            return BrokerError(
                code: failure.code, kind: .unavailable, title: "\(displayName(provider)) unreachable",
                detail: "\(displayName(provider))'s discovery document could not be read; nothing was created.",
                hint: "Retry shortly; check outbound HTTPS to the issuer (BROKER_PROVIDER_TIMEOUT).")
        case .unavailable(let provider, .graph):
            return BrokerError(
                code: failure.code, kind: .unavailable, title: "\(displayName(provider)) unreachable",
                detail: "Facebook's Graph API failed, reset the connection or did not answer in time; nothing was created.",
                hint: "Retry shortly; check outbound HTTPS to Facebook (BROKER_FACEBOOK_GRAPH_URL, BROKER_PROVIDER_TIMEOUT).")
        case .unreadableAnswer(let provider, let service):
            return BrokerError(
                code: failure.code, kind: .unavailable, title: "Unexpected answer from \(displayName(provider))",
                detail:
                    "\(displayName(provider))'s \(service == .graph ? "Graph API" : service == .discovery ? "discovery document" : "token endpoint") answered with a body the broker cannot read."
            )
        case .codeExchangeRefused(let reason, let clientID):
            switch reason {
            case "invalid_client":
                return BrokerError(
                    code: failure.code, kind: .invalidInput, title: "Apple rejected the client secret",
                    detail: "Apple answered invalid_client for client '\(clientID)': the client secret is not accepted.",
                    hint:
                        "Check the team's key id, team id and .p8 key (broker apple team set) and that '\(clientID)' belongs to that team and has Sign in with Apple enabled."
                )
            case "invalid_grant":
                return BrokerError(
                    code: failure.code, kind: .invalidInput, title: "Apple rejected the authorization code",
                    detail:
                        "Apple answered invalid_grant: the authorization code was already used, is older than five minutes, or was issued to another client or redirect URI.",
                    hint: "Send a fresh authorization code from the same client id that signed in, once.")
            default:
                return BrokerError(
                    code: failure.code, kind: .invalidInput, title: "Apple refused the code exchange",
                    detail: "Apple's token endpoint answered '\(reason.prefix(60))'.")
            }
        case .tokenRequestRefused(let provider, let reason):
            return BrokerError(
                code: failure.code, kind: .unavailable, title: "Provider refused the code",
                detail: "\(displayName(provider))'s token endpoint answered '\(reason.prefix(60))'.")
        case .subjectMismatch:
            return BrokerError(
                code: failure.code, kind: .invalidInput, title: "Code belongs to another user",
                detail: "The authorization code was issued for another Apple user than the identity token.")
        case .appleKeyMissing(let teamID):
            return BrokerError(
                code: failure.code, kind: .invalidInput, title: "No Apple key configured",
                detail: "Team \(teamID) has no Sign in with Apple key, so the authorization code cannot be exchanged.",
                hint:
                    "Upload the team's .p8 key: broker apple team set --tenant \(slug) --team-id \(teamID) --key-id <KEYID> --private-key-file key.p8"
            )
        }
    }

    static func problem(_ failure: SignInFailure) -> BrokerError {
        switch failure {
        case .unknownProvider(let name):
            BrokerError(
                code: "unknown_provider", kind: .notFound, title: "Unknown provider",
                detail: "'\(name.prefix(40))' is not a provider of this tenant.",
                hint: "GET /v1/login-options lists the tenant's providers; an operator adds one with 'broker provider enable'.")
        case .accountNotFound(let provider):
            BrokerError(
                code: "account_not_found", kind: .notFound, title: "No account for this identity",
                detail: "This \(displayName(provider)) identity has no account yet and the intent was sign_in; nothing was created.",
                hint: "Use intent sign_up or auto to create the account.")
        case .accountDisabled:
            BrokerError(
                code: "account_disabled", kind: .notPermitted, title: "Account not active",
                detail: "The account linked to this identity is disabled or deleted.")
        case .tokenReplayed:
            BrokerError(
                code: "token_replayed", kind: .unauthenticated, title: "Identity token already used",
                detail: "This identity token (or another with the same jti) has already signed in; each is accepted once.",
                hint: "Get a fresh identity token from the provider (a new sign-in on the device) and send it once.")
        }
    }

    /// A provider that could not be reached, or answered what the broker cannot read (an
    /// odd body, a number out of range), is the provider misbehaving: the request's log says
    /// which, at warning level (never the proof or the answer itself).
    private static func logIfProviderFailed(_ failure: ProviderFailure, tenant: Tenant) {
        let (provider, service, what): (ProviderID, ProviderFailure.Service, String)
        switch failure {
        case .unavailable(let name, let part): (provider, service, what) = (name, part, "provider unreachable or too slow")
        case .unreadableAnswer(let name, let part):
            (provider, service, what) = (name, part, "provider answered with a body that does not fit")
        default: return
        }
        RequestInfo.current?.logger.warning(
            "\(what)",
            metadata: [
                "provider": "\(provider.rawValue)", "service": "\(service.rawValue)", "code": "\(failure.code)",
                "tenant": "\(tenant.slug.rawValue)",
            ])
    }

    private static func enableHint(_ provider: ProviderID, slug: String) -> String {
        ProviderRegistry.enableHint(provider, tenant: slug)
    }
}

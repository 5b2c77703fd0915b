import BrokerCore

/// Why a provider refused a proof, as a meaning: the HTTP problem mapping and the CLI turn it
/// into wording and hints.
public enum ProviderFailure: Error, Sendable, Equatable {
    /// Which part of a provider did not answer usefully.
    public enum Service: String, Sendable {
        /// Its signing keys (JWKS): none could be fetched and none are cached.
        case keys
        /// Apple's token endpoint.
        case tokenEndpoint = "token_endpoint"
        /// Facebook's Graph API.
        case graph
        /// An OpenID Connect issuer's discovery document.
        case discovery
    }

    /// The tenant has not enabled this provider.
    case notEnabled(ProviderID)
    /// The proof names a client the tenant has not registered for this provider.
    case unknownClient(ProviderID, clientID: String)
    /// The client requires the raw nonce of the sign-in and none was sent (Apple).
    case nonceRequired(clientID: String)
    /// The provider requires the raw nonce of the sign-in and none was sent (an OpenID Connect
    /// provider enabled with `--nonce-required`).
    case nonceMissing(ProviderID)
    /// The proof lacks what this provider needs, or carries what it cannot take.
    case malformedProof(String)
    /// The token was refused by a check (the verifier's code and the check's detail).
    case rejected(TokenVerificationError)
    /// The provider could not be reached, answered with an error status, or said nothing
    /// usable: the proof cannot be judged now.
    case unavailable(ProviderID, Service)
    /// The provider answered with a body the broker cannot read.
    case unreadableAnswer(ProviderID, Service)
    /// Apple refused the code exchange: `invalid_client`, `invalid_grant` or another error.
    case codeExchangeRefused(reason: String, clientID: String)
    /// An OpenID Connect token endpoint refused the web flow's code (`invalid_grant`,
    /// `invalid_client`, ...): the reason is for the operator's log and audit.
    case tokenRequestRefused(ProviderID, reason: String)
    /// The authorization code belongs to another user than the identity token.
    case subjectMismatch
    /// Apple's team has no Sign in with Apple key, so a code cannot be exchanged.
    case appleKeyMissing(teamID: String)

    /// The stable machine-readable code of the failure.
    public var code: String {
        switch self {
        case .notEnabled: "provider_not_enabled"
        case .unknownClient: "unknown_client"
        case .nonceRequired, .nonceMissing: "nonce_required"
        case .malformedProof: "invalid_request"
        case .rejected(let error): error.code
        case .unavailable(.apple, .tokenEndpoint): "apple_unavailable"
        case .unavailable: "provider_unavailable"
        case .unreadableAnswer(.apple, .tokenEndpoint): "apple_bad_response"
        case .unreadableAnswer: "provider_unavailable"
        case .codeExchangeRefused(let reason, _):
            switch reason {
            case "invalid_client": "apple_invalid_client"
            case "invalid_grant": "apple_invalid_grant"
            default: "apple_token_error"
            }
        case .tokenRequestRefused: "provider_refused"
        case .subjectMismatch: "subject_mismatch"
        case .appleKeyMissing: "apple_key_missing"
        }
    }
}

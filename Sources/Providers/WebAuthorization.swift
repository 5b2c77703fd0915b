import BrokerCore
import Crypto
import Foundation

/// What the broker sends a person's browser to the provider with: a fresh `state` and `nonce`,
/// and for OpenID Connect the PKCE verifier whose S256 challenge goes along (RFC 7636, RFC 9700).
public struct AuthorizationRequest: Sendable, Equatable {
    public var state: String
    public var nonce: String
    public var codeVerifier: String

    public init(state: String, nonce: String, codeVerifier: String) {
        self.state = state
        self.nonce = nonce
        self.codeVerifier = codeVerifier
    }

    /// `BASE64URL(SHA256(code_verifier))` (RFC 7636 §4.2).
    public var codeChallenge: String { Base64URL.encode(Data(SHA256.hash(data: Data(codeVerifier.utf8)))) }
}

/// What the provider's callback carried besides the state.
public struct AuthorizationResponse: Sendable {
    /// The authorization code.
    public var code: String?
    /// Apple's `form_post`: the id token posted beside the code.
    public var idToken: String?
    /// Apple's `form_post` on the first authorization: the unsigned `user` JSON (a name hint).
    public var user: String?

    public init(code: String?, idToken: String? = nil, user: String? = nil) {
        self.code = code
        self.idToken = idToken
        self.user = user
    }
}

/// A web sign-in the provider vouched for: the identity as a native sign-in would have it, and
/// the provider token to keep (Apple's refresh token).
public struct WebVerification: Sendable {
    public let verified: VerifiedProof
    public let kept: KeptProviderToken?
    /// Gives back a kept token that will not be kept after all.
    public let revokeLater: (@Sendable (_ token: KeptProviderToken, _ reason: String) -> Void)?

    public init(
        verified: VerifiedProof, kept: KeptProviderToken?, revokeLater: (@Sendable (KeptProviderToken, String) -> Void)? = nil
    ) {
        self.verified = verified
        self.kept = kept
        self.revokeLater = revokeLater
    }
}

/// A tenant's client that can start a web sign-in, bound to its settings: where the provider
/// sends the person back (`redirectURI`), where the broker may send them on (`returnURLs`), how
/// the authorize URL is made and how the callback is redeemed.
public struct WebClient: Sendable {
    public let provider: ProviderID
    public let clientID: String
    public let redirectURI: String
    public let returnURLs: [String]
    /// The provider scope of the identities this client's sign-ins verify, when it is known
    /// before the callback (Apple: the Services ID's team); nil otherwise.
    public let providerScope: String?
    /// The provider's authorize URL for this request.
    public let authorizationURL: @Sendable (AuthorizationRequest) -> String
    /// Redeems the callback: verifies what came back against the request, calls
    /// `beforeRedeeming` with the identity as soon as it is known (before anything irreversible
    /// happens at the provider where the callback carries it, as Apple's does; after the token
    /// endpoint's answer for an OpenID Connect code), and returns the verified identity. Throws
    /// ``ProviderFailure``s and whatever `beforeRedeeming` throws.
    public let complete:
        @Sendable (
            _ response: AuthorizationResponse, _ request: AuthorizationRequest, _ tenantID: UUID,
            _ beforeRedeeming: @Sendable (ProviderIdentity) async throws -> Void, _ now: Date
        ) async throws -> WebVerification
    /// Gives back a provider token kept from a web sign-in that did not complete (Apple).
    public let revokeLater: (@Sendable (_ token: KeptProviderToken, _ reason: String) -> Void)?
    /// Whether `complete` learns the identity only from the provider's answer to the redeemed
    /// code (OpenID Connect), so that its `beforeRedeeming` comes with nothing left to do at
    /// the provider; false when the callback carries the identity and the code is redeemed
    /// after the check (Apple).
    public let identityFollowsRedemption: Bool

    public init(
        provider: ProviderID, clientID: String, redirectURI: String, returnURLs: [String], providerScope: String? = nil,
        authorizationURL: @escaping @Sendable (AuthorizationRequest) -> String,
        complete:
            @escaping @Sendable (
                AuthorizationResponse, AuthorizationRequest, UUID, @Sendable (ProviderIdentity) async throws -> Void, Date
            ) async throws -> WebVerification,
        revokeLater: (@Sendable (KeptProviderToken, String) -> Void)? = nil, identityFollowsRedemption: Bool = false
    ) {
        self.revokeLater = revokeLater
        self.identityFollowsRedemption = identityFollowsRedemption
        self.provider = provider
        self.clientID = clientID
        self.redirectURI = redirectURI
        self.returnURLs = returnURLs
        self.providerScope = providerScope
        self.authorizationURL = authorizationURL
        self.complete = complete
    }
}

/// Why a web client cannot be had for a tenant.
public enum WebClientFailure: Error, Sendable, Equatable {
    /// The provider's type has no web flow, or the tenant has not turned it on for the provider.
    case notSupported(ProviderID)
    /// The client id is not one of the tenant's web clients of the provider; `candidates`: the
    /// ones it has, when none was named and more than one could be meant.
    case unknownClient(ProviderID, clientID: String?, candidates: [String])
}

/// Ability: a sign-in can start in a browser (Apple's `form_post` with a Services ID, the
/// OpenID Connect authorization code flow).
public protocol WebAuthorizing: IdentityProvider {
    /// The tenant's web client of `provider` named `clientID` (nil: its only one). Throws
    /// ``WebClientFailure`` and ``ProviderFailure/notEnabled(_:)``; store errors pass through.
    func webClient(clientID: String?, provider: ProviderID, tenantID: UUID, store: any ProviderConfigurationStore) async throws
        -> WebClient
}

extension WebAuthorizing {
    /// `base?name=value&...`, or `&` when `base` has a query already.
    public static func url(_ base: String, _ pairs: [(String, String)]) -> String {
        base + (base.contains("?") ? "&" : "?") + FormEncoding.encode(pairs)
    }
}

/// The `c_hash` / `at_hash` of a value for an RS256 or ES256 token: the base64url of the left
/// half of its SHA-256 (OpenID Connect Core §3.3.2.11).
public enum HalfHash {
    public static func sha256(_ value: String) -> String {
        Base64URL.encode(Data(Data(SHA256.hash(data: Data(value.utf8))).prefix(16)))
    }
}

import BrokerCore
import Foundation

/// What a client posted to prove an identity at a provider: the provider members of a sign-in
/// body (and later of a link request), provider-neutral.
public struct ProviderProof: Sendable {
    /// An OpenID id token: Apple's `identity_token`, Google's `id_token`, Facebook's
    /// `limited_login_token`.
    public var idToken: String?
    /// An OAuth access token checked live at the provider: Facebook's classic `access_token`.
    public var accessToken: String?
    /// The client the app signed in with (Apple: required; Google: optional).
    public var clientID: String?
    /// The raw nonce the app generated.
    public var nonce: String?
    /// Apple's authorization code (first sign-in), exchanged for Apple's refresh token.
    public var authorizationCode: String?
    /// The name the app received from the provider (Apple: first authorization only).
    public var name: PersonName

    public init(
        idToken: String? = nil, accessToken: String? = nil, clientID: String? = nil, nonce: String? = nil,
        authorizationCode: String? = nil, name: PersonName = PersonName(givenName: nil, familyName: nil)
    ) {
        self.idToken = idToken
        self.accessToken = accessToken
        self.clientID = clientID
        self.nonce = nonce
        self.authorizationCode = authorizationCode
        self.name = name
    }
}

/// A verified proof: the identity, and what the session it opens needs.
public struct VerifiedProof: Sendable {
    public var identity: ProviderIdentity
    /// The client the session is opened for (Apple's client id, Google's `aud`, Facebook's app id).
    public var clientID: String
    /// The key under which the tenant accepts this proof once (decision 0018), with the time
    /// the provider issued it (decision 0023). nil for a proof that is meant to be presented
    /// again (a classic Facebook access token, checked live at Facebook on every use).
    public var replayKey: Data?
    public var issuedAt: Date
    /// Whether the replay key covers `issuedAt` (a whole-token key), so the session id may be
    /// ordered by it. A `jti` key does not: two tokens with one `jti` are one token whatever
    /// their `iat`, so their session id is the key alone (decision 0023).
    public var replayKeyCoversIssueTime: Bool
    /// Apple's `transfer_sub` during a team transfer's window: links the new team's `sub` to the
    /// identity an export gave that `transfer_sub` (decision 0045).
    public var transferSubject: String?

    public init(
        identity: ProviderIdentity, clientID: String, replayKey: Data?, issuedAt: Date, replayKeyCoversIssueTime: Bool = false,
        transferSubject: String? = nil
    ) {
        self.identity = identity
        self.clientID = clientID
        self.replayKey = replayKey
        self.issuedAt = issuedAt
        self.replayKeyCoversIssueTime = replayKeyCoversIssueTime
        self.transferSubject = transferSubject
    }

    /// A verified id token: its replay key and issue time from its claims.
    public init(identity: ProviderIdentity, clientID: String, claims: IdentityClaims, token: String, tenantID: UUID) {
        self.init(
            identity: identity, clientID: clientID,
            replayKey: claims.replayKey(tenantID: tenantID, provider: identity.provider.rawValue, token: token),
            issuedAt: claims.issuedAt, replayKeyCoversIssueTime: (claims.tokenID ?? "").isEmpty,
            transferSubject: identity.provider == .apple ? claims.transferSubject.flatMap { $0.isEmpty ? nil : $0 } : nil)
    }
}

/// One identity provider: how the tenant's configuration resolves for a proof (its client id),
/// and how a proof is verified and becomes an identity. Each provider lives in its own folder;
/// ``ProviderRegistry`` maps names to them. Optional abilities are the protocols below.
public protocol IdentityProvider: Sendable {
    /// The tenant's settings of this provider as one sign-in needs them (e.g. Apple: the
    /// resolved client, group and team; Google: the configured client ids).
    associatedtype Settings: Sendable

    /// The tenant's settings of provider `provider` for this proof, resolving the client id it
    /// names. Throws ``ProviderFailure/notEnabled(_:)`` when the tenant has not configured the
    /// provider or turned it off, and ``ProviderFailure/unknownClient(_:clientID:)`` for a client
    /// that is not the tenant's; store errors (the database) pass through unchanged.
    func settings(for proof: ProviderProof, provider: ProviderID, tenantID: UUID, store: any ProviderConfigurationStore) async throws
        -> Settings

    /// Verifies the proof against the settings: the token and every claim, or the live check
    /// at the provider.
    func verify(_ proof: ProviderProof, settings: Settings, tenantID: UUID, at now: Date) async throws(ProviderFailure)
        -> VerifiedProof
}

/// What ``TokenCheckOptions`` a provider's id-token policy is built from: the tenant's settings
/// on the sign-in path, the operator's flags in `broker token verify`. One function builds the
/// policy for both, so the two can never differ.
public struct TokenCheckOptions: Sendable {
    /// Accepted audiences (client ids); nil: shown, not compared (`token verify` without
    /// `--audience`).
    public var audiences: Set<String>?
    /// The raw nonce to compare; nil: not compared.
    public var rawNonce: String?
    /// Apple: how the client compares the nonce.
    public var nonceMode: NonceMode
    /// Google: the Workspace domain `hd` must name.
    public var hostedDomain: String?
    /// Google: the clients `azp` may name; nil: the accepted audiences.
    public var authorizedParties: Set<String>?

    public init(
        audiences: Set<String>?, rawNonce: String? = nil, nonceMode: NonceMode = .raw, hostedDomain: String? = nil,
        authorizedParties: Set<String>? = nil
    ) {
        self.audiences = audiences
        self.authorizedParties = authorizedParties
        self.rawNonce = rawNonce
        self.nonceMode = nonceMode
        self.hostedDomain = hostedDomain
    }
}

/// Ability: the provider's proofs are OpenID id tokens checked by the shared verifier.
public protocol IDTokenProvider: IdentityProvider {
    /// The provider's published signing keys.
    var keys: JWKSCache { get }
    /// The verification policy and nonce expectation for these options.
    static func tokenPolicy(_ options: TokenCheckOptions) -> (VerificationPolicy, NonceExpectation)
}

extension IDTokenProvider {
    /// The verifier for these options: what sign-in and `broker token verify` both run.
    public func verifier(_ options: TokenCheckOptions) -> (IdentityTokenVerifier, NonceExpectation) {
        let (policy, nonce) = Self.tokenPolicy(options)
        return (IdentityTokenVerifier(policy: policy, keys: keys), nonce)
    }

    /// Verifies an id token of provider `provider` with these options.
    public func verifyToken(_ token: String, provider: ProviderID, options: TokenCheckOptions, at now: Date)
        async throws(ProviderFailure) -> IdentityClaims
    {
        let (verifier, nonce) = verifier(options)
        return try await verifier.verifyForProvider(token, provider: provider, nonce: nonce, at: now)
    }
}

extension IdentityTokenVerifier {
    /// Verifies an id token; a failure says whether the provider (its keys) or the token is at
    /// fault.
    public func verifyForProvider(_ token: String, provider: ProviderID, nonce: NonceExpectation, at now: Date)
        async throws(ProviderFailure) -> IdentityClaims
    {
        do {
            return try await verify(token, nonce: nonce, at: now)
        } catch  where error.isProviderUnavailable {
            throw .unavailable(provider, .keys)
        } catch {
            throw .rejected(error)
        }
    }
}

/// A provider token the broker keeps for later (Apple's refresh token): raw, to give back to
/// the provider if the sign-in fails, and sealed, to store.
public struct KeptProviderToken: Sendable {
    public let raw: String
    public let sealed: Data

    public init(raw: String, sealed: Data) {
        self.raw = raw
        self.sealed = sealed
    }
}

/// Ability: an authorization code from the app is exchanged at the provider for a refresh
/// token the broker keeps (Apple).
public protocol AuthorizationCodeExchanging: IdentityProvider {
    /// Redeems `code` for the identity `subject`; nil when the provider gave no token the broker
    /// can prove to be that identity's (then it is revoked, never kept). Throws
    /// ``ProviderFailure``s, and the sealing box's errors.
    func exchange(code: String, subject: String, settings: Settings, tenantID: UUID, at now: Date) async throws
        -> KeptProviderToken?
}

/// Ability: tokens the broker kept can be revoked at the provider (Apple `/auth/revoke`).
public protocol TokenRevoking: IdentityProvider {
    /// Revokes in the background; the caller does not wait for the provider.
    func revokeLater(_ token: KeptProviderToken, settings: Settings, reason: String)
}

/// Ability: the provider sends server-to-server notifications about its identities (Apple's
/// account lifecycle events; handled by a later issue).
public protocol ServerNotifying: IdentityProvider {}

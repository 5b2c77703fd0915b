import BrokerCore
import Foundation

/// Google Sign-In: RS256 id tokens whose `aud` is one of the tenant's OAuth client ids, `azp`
/// (when present) one of them too, `hd` the configured Workspace domain when one is set, the
/// raw nonce when the body sends one. `sub` is global at Google: the identity's scope is empty.
public struct GoogleProvider: IDTokenProvider {
    public typealias Settings = GoogleSettings

    /// The tenant's Google configuration and the client the body named, if any.
    public struct GoogleSettings: Sendable {
        public var configuration: ProviderConfiguration
        /// The client id the body sent; the token's `aud` must then be exactly it.
        public var requestedClientID: String?
    }

    public let keys: JWKSCache
    /// The web flow (nil: a provider built without one).
    let codeFlow: OIDCCodeFlow?

    public init(keys: JWKSCache) {
        self.keys = keys
        self.codeFlow = nil
    }

    init(keys: JWKSCache, codeFlow: OIDCCodeFlow) {
        self.keys = keys
        self.codeFlow = codeFlow
    }

    public static func tokenPolicy(_ options: TokenCheckOptions) -> (VerificationPolicy, NonceExpectation) {
        var policy = VerificationPolicy(issuers: Google.issuers, algorithms: ["RS256"], audiences: options.audiences)
        policy.claimChecks = [
            .authorizedParty(options.authorizedParties ?? options.audiences), Self.hostedDomain(options.hostedDomain),
        ]
        return (policy, options.rawNonce.map { NonceExpectation(rawNonce: $0, mode: .raw) } ?? .none)
    }

    public func settings(for proof: ProviderProof, provider: ProviderID, tenantID: UUID, store: any ProviderConfigurationStore)
        async throws -> GoogleSettings
    {
        guard let configuration = try await store.configuration(tenantID: tenantID, provider: .google), configuration.enabled else {
            throw ProviderFailure.notEnabled(.google)
        }
        if let clientID = proof.clientID, !configuration.clientIDs.contains(clientID) {
            throw ProviderFailure.unknownClient(.google, clientID: clientID)
        }
        return GoogleSettings(configuration: configuration, requestedClientID: proof.clientID)
    }

    public func verify(_ proof: ProviderProof, settings: GoogleSettings, tenantID: UUID, at now: Date)
        async throws(ProviderFailure) -> VerifiedProof
    {
        guard let token = proof.idToken else { throw .malformedProof("id_token is required") }
        let configured = Set(settings.configuration.clientIDs)
        // `azp` is compared with every configured client (an Android token's `azp` is the
        // Android client, its `aud` the web client).
        let claims = try await verifyToken(
            token, provider: .google,
            options: TokenCheckOptions(
                audiences: settings.requestedClientID.map { [$0] } ?? configured, rawNonce: proof.nonce,
                hostedDomain: settings.configuration.hostedDomain, authorizedParties: configured),
            at: now)
        return Self.verified(claims, token: token, tenantID: tenantID)
    }

    /// The identity of verified claims: `sub` is global at Google.
    static func verified(_ claims: IdentityClaims, token: String, tenantID: UUID) -> VerifiedProof {
        var attributes: [String: String] = [:]
        if let domain = claims.hostedDomain, !domain.isEmpty { attributes["hd"] = domain }
        let identity = ProviderIdentity(
            provider: .google, providerScope: "", subject: claims.subject, email: claims.email,
            // Google sends a JSON boolean; anything else does not vouch for the address.
            emailVerified: !(claims.email ?? "").isEmpty && claims.payload["email_verified"] == .bool(true), isPrivateEmail: false,
            name: claims.name, attributes: attributes, emailTrust: .verified)
        return VerifiedProof(identity: identity, clientID: claims.audiences.first ?? "", claims: claims, token: token, tenantID: tenantID)
    }

    /// `hd` must equal the configured hosted domain; when one is set a token without `hd`
    /// (a consumer account) is refused.
    static func hostedDomain(_ required: String?) -> ClaimCheck {
        ClaimCheck("hd") { payload in
            let domain = payload["hd"]?.string
            guard let required else { return .success(domain.map { "\($0) (no domain required)" } ?? "absent (no domain required)") }
            guard let domain else {
                return .failure(.init("hosted_domain_mismatch", "The token has no hosted domain (hd); \(required) is required."))
            }
            return domain.lowercased() == required.lowercased()
                ? .success(domain)
                : .failure(.init("hosted_domain_mismatch", "The token's hosted domain '\(domain.prefix(120))' is not \(required)."))
        }
    }
}

extension GoogleProvider: WebAuthorizing {
    public func webClient(clientID: String?, provider: ProviderID, tenantID: UUID, store: any ProviderConfigurationStore)
        async throws -> WebClient
    {
        guard let configuration = try await store.configuration(tenantID: tenantID, provider: .google), configuration.enabled else {
            throw ProviderFailure.notEnabled(.google)
        }
        guard let codeFlow, let web = OIDCWebSettings(configuration) else { throw WebClientFailure.notSupported(.google) }
        if let clientID, clientID != web.clientID {
            throw WebClientFailure.unknownClient(.google, clientID: clientID, candidates: [web.clientID])
        }
        let configured = Set(configuration.clientIDs)
        return try codeFlow.webClient(provider: .google, configuration: configuration, web: web) {
            [keys] idToken, nonce, _, tenantID, now throws(ProviderFailure) in
            // Google never signs with the client secret: its keys only.
            let (policy, expectation) = Self.tokenPolicy(
                TokenCheckOptions(
                    audiences: [web.clientID], rawNonce: nonce, hostedDomain: configuration.hostedDomain, authorizedParties: configured))
            let claims = try await IdentityTokenVerifier(policy: policy, keys: keys).verifyForProvider(
                idToken, provider: .google, nonce: expectation, at: now)
            return Self.verified(claims, token: idToken, tenantID: tenantID)
        }
    }
}

import BrokerCore
import Foundation

/// A generic OpenID Connect provider (decision 0035): id tokens of the configured issuer for one
/// of the configured client ids, Google's rules for `aud`, `azp` and the nonce, keys from the
/// issuer's `jwks_uri`. The identity is the issuer (after `{tid}`) and `sub` (OpenID Connect
/// Core §5.7): `identity.provider_scope` is the issuer.
public struct OIDCProvider: IdentityProvider {
    public struct Settings: Sendable {
        public var provider: ProviderID
        public var configuration: ProviderConfiguration
        public var oidc: OIDCSettings
        /// The client id the body sent; the token's `aud` must then be exactly it.
        public var requestedClientID: String?
    }

    let keySets: ProviderKeySets
    /// The web flow (nil: a provider built without one, which never starts it).
    let codeFlow: OIDCCodeFlow?

    public init(keySets: ProviderKeySets) {
        self.keySets = keySets
        self.codeFlow = nil
    }

    init(keySets: ProviderKeySets, codeFlow: OIDCCodeFlow) {
        self.keySets = keySets
        self.codeFlow = codeFlow
    }

    public func settings(for proof: ProviderProof, provider: ProviderID, tenantID: UUID, store: any ProviderConfigurationStore)
        async throws -> Settings
    {
        guard let configuration = try await store.configuration(tenantID: tenantID, provider: provider), configuration.enabled,
            let oidc = OIDCSettings(configuration)
        else { throw ProviderFailure.notEnabled(provider) }
        if let clientID = proof.clientID, !configuration.clientIDs.contains(clientID) {
            throw ProviderFailure.unknownClient(provider, clientID: clientID)
        }
        return Settings(provider: provider, configuration: configuration, oidc: oidc, requestedClientID: proof.clientID)
    }

    public func verify(_ proof: ProviderProof, settings: Settings, tenantID: UUID, at now: Date) async throws(ProviderFailure)
        -> VerifiedProof
    {
        guard let token = proof.idToken else { throw .malformedProof("id_token is required") }
        if settings.oidc.nonceRequired, (proof.nonce ?? "").isEmpty { throw .nonceMissing(settings.provider) }
        guard let keysURL = settings.oidc.keysURL else { throw .unavailable(settings.provider, .keys) }
        let configured = Set(settings.configuration.clientIDs)
        let (policy, nonce) = settings.oidc.policy(
            TokenCheckOptions(
                audiences: settings.requestedClientID.map { [$0] } ?? configured, rawNonce: proof.nonce, authorizedParties: configured))
        let verifier = IdentityTokenVerifier(policy: policy, keys: keySets.keys(settings.oidc.issuer, url: keysURL))
        let claims = try await verifier.verifyForProvider(token, provider: settings.provider, nonce: nonce, at: now)
        return Self.verified(
            claims, name: proof.name, token: token, settings: settings.oidc, provider: settings.provider, tenantID: tenantID)
    }

    /// The identity of verified claims: the issuer (after `{tid}`) and `sub`.
    static func verified(
        _ claims: IdentityClaims, name given: PersonName, token: String, settings: OIDCSettings, provider: ProviderID, tenantID: UUID
    ) -> VerifiedProof {
        let name = given.givenName != nil || given.familyName != nil ? given : claims.name
        let identity = ProviderIdentity(
            provider: provider, providerScope: claims.issuer, subject: claims.subject, email: claims.email,
            emailVerified: !(claims.email ?? "").isEmpty && claims.payload["email_verified"] == .bool(true), isPrivateEmail: false,
            name: name, emailTrust: settings.emailTrust)
        return VerifiedProof(identity: identity, clientID: claims.audiences.first ?? "", claims: claims, token: token, tenantID: tenantID)
    }
}

extension OIDCProvider: WebAuthorizing {
    public func webClient(clientID: String?, provider: ProviderID, tenantID: UUID, store: any ProviderConfigurationStore)
        async throws -> WebClient
    {
        guard let configuration = try await store.configuration(tenantID: tenantID, provider: provider), configuration.enabled,
            let oidc = OIDCSettings(configuration)
        else { throw ProviderFailure.notEnabled(provider) }
        guard let codeFlow, let web = OIDCWebSettings(configuration) else { throw WebClientFailure.notSupported(provider) }
        if let clientID, clientID != web.clientID {
            throw WebClientFailure.unknownClient(provider, clientID: clientID, candidates: [web.clientID])
        }
        let keySets = keySets
        return try codeFlow.webClient(provider: provider, configuration: configuration, web: web) {
            idToken, nonce, secret, tenantID, now throws(ProviderFailure) in
            guard let keysURL = oidc.keysURL else { throw .unavailable(provider, .keys) }
            var (policy, expectation) = oidc.policy(
                TokenCheckOptions(audiences: [web.clientID], rawNonce: nonce, authorizedParties: [web.clientID]))
            if secret != nil { policy.algorithms.insert("HS256") }
            let verifier = IdentityTokenVerifier(policy: policy, keys: keySets.keys(oidc.issuer, url: keysURL), sharedSecret: secret)
            let claims = try await verifier.verifyForProvider(idToken, provider: provider, nonce: expectation, at: now)
            return Self.verified(
                claims, name: PersonName(givenName: nil, familyName: nil), token: idToken, settings: oidc, provider: provider,
                tenantID: tenantID)
        }
    }
}

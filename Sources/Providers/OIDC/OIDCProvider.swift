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

    public init(keySets: ProviderKeySets) { self.keySets = keySets }

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
        let name = proof.name.givenName != nil || proof.name.familyName != nil ? proof.name : claims.name
        let identity = ProviderIdentity(
            provider: settings.provider, providerScope: claims.issuer, subject: claims.subject, email: claims.email,
            emailVerified: !(claims.email ?? "").isEmpty && claims.payload["email_verified"] == .bool(true), isPrivateEmail: false,
            name: name, emailTrust: settings.oidc.emailTrust)
        return VerifiedProof(identity: identity, clientID: claims.audiences.first ?? "", claims: claims, token: token, tenantID: tenantID)
    }
}

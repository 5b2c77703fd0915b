import BrokerAPI
import BrokerApplication
import BrokerCore
import Crypto
import Foundation
import HTTPTypes
import Storage

/// Public per-tenant metadata: the JWKS and the issuer metadata.
extension APIHandlers {
    func getTenantJWKS(_ input: Operations.GetTenantJWKS.Input) async throws -> Operations.GetTenantJWKS.Output {
        let slug = input.path.tenant
        // A text that cannot be a slug (a NUL, a slash) names no tenant: never sent to PostgreSQL.
        guard (try? TenantSlug(slug)) != nil, let (tenant, keys) = try await services.database.signingKeys.list(tenantSlug: slug)
        else {
            throw BrokerError.tenantNotFound(slug)
        }
        let published = SigningKeyRing(keys).published(at: Date())
        let jwks = try published.map { status in
            let publicKey = try P256.Signing.PublicKey(x963Representation: status.record.publicKey)
            let (x, y) = JWKThumbprint.coordinates(of: publicKey)
            return Components.Schemas.Jwk(kty: .ec, crv: .p256, x: x, y: y, kid: status.record.kid, alg: .es256, use: .sig)
        }
        RequestInfo.setResponseHeader(.cacheControl, Self.cacheControl(for: tenant))
        return .ok(.init(body: .json(.init(keys: jwks))))
    }

    func getTenantIssuerMetadata(_ input: Operations.GetTenantIssuerMetadata.Input) async throws
        -> Operations.GetTenantIssuerMetadata.Output
    {
        let slug = input.path.tenant
        guard (try? TenantSlug(slug)) != nil, let tenant = try await services.database.tenants.find(slug: slug) else {
            throw BrokerError.tenantNotFound(slug)
        }
        let issuer = services.issuer(for: tenant.slug)
        // The tenant's OpenID Provider (decision 0082); introspection and revocation are the REST
        // API's, authenticated by an API key.
        let metadata = Components.Schemas.IssuerMetadata(
            issuer: issuer,
            jwksUri: "\(issuer)/.well-known/jwks.json",
            tokenEndpoint: "\(issuer)/token",
            introspectionEndpoint: "\(services.publicURL)/v1/sessions/introspect",
            revocationEndpoint: "\(services.publicURL)/v1/sessions/revoke",
            idTokenSigningAlgValuesSupported: ["ES256"],
            tokenEndpointAuthMethodsSupported: TokenService.ClientCredentials.Method.allCases.map(\.rawValue),
            introspectionEndpointAuthMethodsSupported: ["client_secret_bearer"],
            revocationEndpointAuthMethodsSupported: ["client_secret_bearer"],
            subjectTypesSupported: ["public"],
            authorizationEndpoint: "\(issuer)/authorize",
            endSessionEndpoint: "\(issuer)/logout",
            userinfoEndpoint: "\(issuer)/userinfo",
            responseTypesSupported: ["code"],
            responseModesSupported: ["query"],
            grantTypesSupported: TokenService.grantTypes,
            codeChallengeMethodsSupported: ["S256"],
            scopesSupported: OAuthScope.allCases.map(\.rawValue),
            claimsSupported: IDTokenClaims.CodingKeys.allNames,
            uiLocalesSupported: ["en", "ja"],
            authorizationResponseIssParameterSupported: true)
        RequestInfo.setResponseHeader(.cacheControl, Self.cacheControl(for: tenant))
        return .ok(.init(body: .json(metadata)))
    }

    /// Resource servers must see a `next` key before it signs: cache for at most half the
    /// activation delay, and never more than five minutes.
    static func cacheControl(for tenant: Tenant) -> String {
        "public, max-age=\(max(0, min(300, tenant.keyActivationDelay / 2)))"
    }
}

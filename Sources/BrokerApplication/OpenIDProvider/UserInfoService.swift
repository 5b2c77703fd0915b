import BrokerCore
import Foundation
import JWTKit
import Logging
import Storage

/// The userinfo endpoint of each tenant's OpenID Provider, `/t/{tenant}/userinfo` (OpenID
/// Connect Core §5.3, decision 0082): for an access token the tenant's OpenID Provider issued
/// (it carries the granted `scope`) whose session is live, `sub` and the claims its scope allows.
package struct UserInfoService: Sendable {
    package let database: Database
    package let tenants: TenantDirectory
    package let tokens: SessionTokens

    package init(database: Database, tenants: TenantDirectory, tokens: SessionTokens) {
        self.database = database
        self.tenants = tenants
        self.tokens = tokens
    }

    /// The person's claims; throws ``TokenEndpointError`` (401 `invalid_token` for a token that
    /// is not good here, 403 `insufficient_scope` without `openid`).
    package func claims(tenantSlug: String, accessToken: String, context: OperationContext) async throws(TokenEndpointError)
        -> (sub: String, claims: ScopedClaims)
    {
        let invalid = TokenEndpointError("invalid_token", "The access token is not valid here, expired, or its session ended.", status: 401)
        do {
            guard let tenant = try await tenants.tenant(slug: tenantSlug) else {
                throw invalid
            }
            return try await TenantScope.tenant(tenant.id) {
                guard let token = await tokens.verifyAccessToken(accessToken, tenant: tenant), let scope = token.scope,
                    let sessionID = UUID(uuidString: token.sid), let accountID = UUID(uuidString: token.sub.value)
                else { throw invalid }
                let scopes = OAuthScope.granted(scope)
                guard scopes.contains(.openid) else {
                    throw TokenEndpointError("insufficient_scope", "The access token was not granted the openid scope.", status: 403)
                }
                guard try await database.sessions.liveSession(tenantID: tenant.id, sessionID: sessionID) != nil,
                    let (account, _) = try await database.accounts.find(tenantID: tenant.id, accountID: accountID)
                else { throw invalid }
                return (account.id.lowercasedString, ScopedClaims(account: account, scopes: scopes))
            }
        } catch let error as TokenEndpointError {
            throw error
        } catch {
            guard error.isDatabaseUnavailable || error is CancellationError else {
                context.logger.error("userinfo failed", metadata: ["error": "\(String(describing: type(of: error)))"])
                throw .serverError
            }
            throw .temporarilyUnavailable
        }
    }
}

import BrokerCore
import Foundation
import JWTKit
import Logging
import Storage

/// RP-Initiated Logout 1.0 at `/t/{tenant}/logout` (issue 42 §2, decision 0082): the client
/// names the session by an ID token the tenant issued it (`id_token_hint`, expired or not), the
/// broker ends that session, and sends the person to a `post_logout_redirect_uri` the client
/// registered (with `state`), or shows that they are signed out.
package struct LogoutService: Sendable {
    package let database: Database
    package let tenants: TenantDirectory
    package let clients: ClientDirectory
    package let tokens: SessionTokens

    package init(database: Database, tenants: TenantDirectory, clients: ClientDirectory, tokens: SessionTokens) {
        self.database = database
        self.tenants = tenants
        self.clients = clients
        self.tokens = tokens
    }

    package enum Outcome: Sendable, Equatable {
        /// 303 to the client's registered post-logout URI.
        case redirect(String)
        /// The person is signed out; no URI to go back to.
        case signedOut
        /// The request cannot be honoured (a page, never a redirect).
        case refused(Refusal)
        /// The database did not answer (a page).
        case unavailable
    }

    package enum Refusal: String, Sendable, Equatable {
        case unknownTenant = "unknown_tenant"
        case invalidHint = "invalid_id_token_hint"
        case clientMismatch = "client_mismatch"
        case unregisteredURI = "post_logout_redirect_uri_not_registered"
        case hintRequired = "id_token_hint_required"
    }

    /// The hint's claims, its signature checked by the tenant's keys, its expiry not (a hint may
    /// be an old ID token: OpenID Connect RP-Initiated Logout §2).
    struct Hint: JWTPayload {
        var iss: IssuerClaim
        var sub: SubjectClaim
        var aud: AudienceClaim
        var sid: String?

        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    package func logout(tenantSlug: String, fields: [String: String], context: OperationContext) async -> Outcome {
        do {
            guard let tenant = try await tenants.tenant(slug: tenantSlug) else {
                return .refused(.unknownTenant)
            }
            return try await TenantScope.tenant(tenant.id) {
                guard let hintText = fields["id_token_hint"] else {
                    // Without a hint nothing says which session to end, nor whose URI it is.
                    return fields["post_logout_redirect_uri"] == nil ? .signedOut : .refused(.hintRequired)
                }
                guard hintText.utf8.count <= 8_192, Base64URL.isCanonicalCompactJWS(hintText),
                    let hint = try? await tokens.keys.verifier(for: tenant).verify(hintText, as: Hint.self),
                    hint.iss.value == tokens.issuer(for: tenant), hint.aud.value.count == 1, let clientID = hint.aud.value.first,
                    let client = try await clients.client(tenantID: tenant.id, clientID: clientID)
                else { return .refused(.invalidHint) }
                if let named = fields["client_id"], named != clientID { return .refused(.clientMismatch) }
                var target: String?
                if let uri = fields["post_logout_redirect_uri"] {
                    guard client.postLogoutRedirectURIs.contains(uri) else { return .refused(.unregisteredURI) }
                    target = uri
                }
                if let sid = hint.sid.flatMap(UUID.init(uuidString:)),
                    let party = try await database.sessions.relyingParty(tenantID: tenant.id, sessionID: sid),
                    party.clientID == clientID
                {
                    try await database.sessions.revoke(tenantID: tenant.id, sessionID: sid, reason: "logout")
                }
                guard let target else { return .signedOut }
                return .redirect(WebSignInService.returnURL(target, fields["state"].map { [("state", $0)] } ?? []))
            }
        } catch {
            context.logger.warning("logout: the database did not answer", metadata: ["error": "\(String(describing: type(of: error)))"])
            return .unavailable
        }
    }
}

import BrokerCore
import Foundation
import JWTKit
import Logging
import Providers
import Storage

/// The token endpoint of each tenant's OpenID Provider, `/t/{tenant}/token` (issue 42 §2,
/// decision 0082): the client authenticates (`client_secret_basic` or `client_secret_post`, or
/// a public client by its id alone), then redeems an authorization code or refreshes its
/// session. Every refusal is an RFC 6749 §5.2 error.
package struct TokenService: Sendable {
    package let database: Database
    package let tenants: TenantDirectory
    package let clients: ClientDirectory
    package let webSignIn: WebSignInService
    package let sessions: SessionService
    package let tokens: SessionTokens

    package init(
        database: Database, tenants: TenantDirectory, clients: ClientDirectory, webSignIn: WebSignInService, sessions: SessionService,
        tokens: SessionTokens
    ) {
        self.database = database
        self.tenants = tenants
        self.clients = clients
        self.webSignIn = webSignIn
        self.sessions = sessions
        self.tokens = tokens
    }

    /// How the client presented itself.
    package struct ClientCredentials: Sendable, Equatable {
        package enum Method: String, Sendable, CaseIterable {
            case basic = "client_secret_basic"
            case post = "client_secret_post"
            case none
        }

        package let clientID: String
        package let secret: String?
        package let method: Method

        package init(clientID: String, secret: String?, method: Method) {
            self.clientID = clientID
            self.secret = secret
            self.method = method
        }
    }

    /// A successful answer (RFC 6749 §5.1, OpenID Connect Core §3.1.3.3).
    package struct Answer: Sendable {
        package let accessToken: String
        package let expiresIn: Int
        package let refreshToken: String?
        package let idToken: String?
        package let scope: String
        /// RFC 8693's `issued_token_type`, for a token exchange.
        package var issuedTokenType: String? = nil
    }

    package static let authorizationCodeGrant = "authorization_code"
    package static let refreshTokenGrant = "refresh_token"
    package static let tokenExchangeGrant = "urn:ietf:params:oauth:grant-type:token-exchange"
    /// The grants the endpoint serves (discovery's `grant_types_supported`).
    package static let grantTypes = [authorizationCodeGrant, refreshTokenGrant, tokenExchangeGrant]
    package static let idTokenType = "urn:ietf:params:oauth:token-type:id_token"
    package static let accessTokenType = "urn:ietf:params:oauth:token-type:access_token"
    /// The scope an exchange grants when the client asks for none.
    package static let exchangeScopes: [OAuthScope] = [.openid, .email, .profile, .offlineAccess]

    /// Answers one token request; throws only ``TokenEndpointError``.
    package func token(tenantSlug: String, credentials: ClientCredentials, fields: [String: String], context: OperationContext)
        async throws(TokenEndpointError) -> Answer
    {
        do {
            return try await answer(tenantSlug: tenantSlug, credentials: credentials, fields: fields, context: context)
        } catch let error as TokenEndpointError {
            throw error
        } catch is InvalidGrant {
            throw .invalidGrant("The refresh token is unknown, expired, revoked or was used before.")
        } catch let failure as SignInFailure {
            switch failure {
            case .accountNotFound: throw .invalidGrant("No account is linked to this identity.")
            case .accountDisabled: throw .invalidGrant("The account is disabled.")
            case .tokenReplayed: throw .invalidGrant("The provider's token was used before.")
            case .unknownProvider: throw .invalidGrant("The provider is not enabled.")
            }
        } catch is WebSignInFailure {
            throw .invalidGrant("The code is unknown, expired, or another client's.")
        } catch let failure as ProviderFailure {
            switch failure {
            case .unavailable, .unreadableAnswer:
                context.logger.warning("token request: the provider did not answer usefully", metadata: ["code": "\(failure.code)"])
                throw .temporarilyUnavailable
            case .notEnabled, .unknownClient:
                throw .invalidGrant("The subject token's provider or client is not one the tenant enabled (\(failure.code)).")
            default:
                throw .invalidGrant("The subject token did not verify (\(failure.code)).")
            }
        } catch {
            if error.isDatabaseUnavailable || error is CancellationError {
                context.logger.warning(
                    "token request: the database did not answer", metadata: ["error": "\(String(describing: type(of: error)))"])
                throw .temporarilyUnavailable
            }
            context.logger.error("token request failed", metadata: ["error": "\(String(describing: type(of: error)))"])
            throw .serverError
        }
    }

    private func answer(tenantSlug: String, credentials: ClientCredentials, fields: [String: String], context: OperationContext)
        async throws -> Answer
    {
        guard let tenant = try await tenants.tenant(slug: tenantSlug),
            tenant.status == .active
        else { throw TokenEndpointError.invalidClient("The client is not one of this tenant's.") }
        return try await TenantScope.tenant(tenant.id) {
            guard
                let client = try await clients.authenticate(
                    tenantID: tenant.id, clientID: credentials.clientID, presentedSecret: credentials.secret)
            else {
                context.logger.notice(
                    "token request: the client did not authenticate",
                    metadata: ["client_id": "\(credentials.clientID.prefix(32))", "method": "\(credentials.method.rawValue)"])
                throw TokenEndpointError.invalidClient("The client is unknown or its credentials are wrong.")
            }
            switch fields["grant_type"] {
            case Self.authorizationCodeGrant?:
                return try await redeem(fields, client: client, tenant: tenant, context: context)
            case Self.refreshTokenGrant?:
                return try await refresh(fields, client: client, tenant: tenant, context: context)
            case Self.tokenExchangeGrant?:
                return try await exchange(fields, client: client, tenant: tenant, context: context)
            case nil:
                throw TokenEndpointError.invalidRequest("grant_type is missing.")
            case let other?:
                throw TokenEndpointError.unsupportedGrantType("grant_type \(other.prefix(64)) is not supported.")
            }
        }
    }

    private func redeem(_ fields: [String: String], client: OAuthClient, tenant: Tenant, context: OperationContext) async throws
        -> Answer
    {
        guard let code = fields["code"] else { throw TokenEndpointError.invalidRequest("code is missing.") }
        let redeemed = try await webSignIn.redeem(
            code: code, client: client, tenant: tenant, redirectURI: fields["redirect_uri"], codeVerifier: fields["code_verifier"],
            context: context)
        let scope = OAuthScope.text(redeemed.scopes)
        let now = Date()
        let signer = try await tokens.signer(for: tenant, now: now)
        let access = try await tokens.accessToken(
            tenant: tenant, accountID: redeemed.accountID, sessionID: redeemed.sessionID, idp: redeemed.idp, clientID: client.clientID,
            scope: scope, now: now, signer: signer)
        let idToken = try await self.idToken(
            tenant: tenant, client: client, subject: redeemed.accountID, claims: redeemed.claims, sessionID: redeemed.sessionID,
            idp: redeemed.idp, nonce: redeemed.nonce, authTime: redeemed.authTime, accessToken: access.token, now: now, signer: signer)
        return Answer(
            accessToken: access.token, expiresIn: access.expiresIn,
            refreshToken: redeemed.scopes.contains(.offlineAccess) ? redeemed.refreshToken.value : nil, idToken: idToken, scope: scope)
    }

    private func refresh(_ fields: [String: String], client: OAuthClient, tenant: Tenant, context: OperationContext) async throws
        -> Answer
    {
        guard let value = fields["refresh_token"] else { throw TokenEndpointError.invalidRequest("refresh_token is missing.") }
        // The session must be this client's before anything rotates: another client's attempt
        // changes nothing.
        guard let presented = RefreshToken(parsing: value), let sessionID = presented.sessionID,
            let party = try await database.sessions.relyingParty(tenantID: tenant.id, sessionID: sessionID),
            party.clientID == client.clientID, let scope = party.scope
        else { throw TokenEndpointError.invalidGrant("The refresh token is unknown, expired, revoked, or another client's.") }
        let scopes = OAuthScope.granted(scope)
        if let asked = fields["scope"], !Set(OAuthScope.granted(asked)).isSubset(of: Set(scopes)) {
            throw TokenEndpointError("invalid_scope", "A refresh cannot widen the scope granted.")
        }
        let issued = try await sessions.refresh(tenant: tenant, refreshToken: value, context: context)
        guard let session = issued.session,
            let (account, _) = try await database.accounts.find(tenantID: tenant.id, accountID: session.accountID)
        else { throw TokenEndpointError.invalidGrant("The session's account is gone.") }
        let idToken = try await self.idToken(
            tenant: tenant, client: client, subject: account.id, claims: ScopedClaims(account: account, scopes: scopes),
            sessionID: session.sessionID, idp: session.idp, nonce: nil, authTime: session.createdAt, accessToken: issued.accessToken)
        return Answer(
            accessToken: issued.accessToken, expiresIn: issued.expiresIn, refreshToken: issued.refreshToken.value, idToken: idToken,
            scope: scope)
    }

    /// RFC 8693 token exchange (decision 0083): an identity token of one of the tenant's
    /// providers, found by its `iss`, is the native sign-in in standard form, with the same
    /// verification, replay refusal and account rules as `POST /v1/sign-in/{provider}`; the
    /// session opened is the client's.
    private func exchange(_ fields: [String: String], client: OAuthClient, tenant: Tenant, context: OperationContext) async throws
        -> Answer
    {
        guard let subjectToken = fields["subject_token"] else { throw TokenEndpointError.invalidRequest("subject_token is missing.") }
        guard fields["subject_token_type"] == Self.idTokenType else {
            throw TokenEndpointError.invalidRequest("subject_token_type must be \(Self.idTokenType).")
        }
        if let requested = fields["requested_token_type"], requested != Self.accessTokenType {
            throw TokenEndpointError.invalidRequest("requested_token_type can only be \(Self.accessTokenType).")
        }
        if fields["actor_token"] != nil { throw TokenEndpointError.invalidRequest("actor_token is not supported.") }
        var scopes = fields["scope"].map(OAuthScope.granted) ?? Self.exchangeScopes
        if !scopes.contains(.openid) { scopes.insert(.openid, at: 0) }
        let (claimedIssuer, audiences) = UnverifiedToken.issuerAndAudiences(subjectToken)
        guard let issuer = claimedIssuer,
            let provider = try await SubjectTokenIssuers.provider(
                issuer: issuer, configurations: { try await database.providerConfigs.list(tenantID: tenant.id) })
        else { throw TokenEndpointError.invalidGrant("The subject token's issuer is not one of the tenant's providers.") }
        let signIn = webSignIn.signIn
        let registered = try await webSignIn.store.registered(provider, tenantID: tenant.id, in: webSignIn.providers)
        let proof = ProviderProof(
            idToken: subjectToken, clientID: audiences.first, nonce: fields["nonce"])
        let now = Date()
        let outcome = try await signIn.signIn(
            tenant: tenant, provider: provider, type: registered, proof: proof, intent: .auto, platform: nil,
            relyingParty: RelyingPartySession(clientID: client.clientID, scope: OAuthScope.text(scopes)), context: context, now: now)
        let idToken = try await self.idToken(
            tenant: tenant, client: client, subject: outcome.account.id, claims: ScopedClaims(account: outcome.account, scopes: scopes),
            sessionID: outcome.sessionID, idp: outcome.identity.provider, nonce: nil, authTime: now,
            accessToken: outcome.session.accessToken)
        return Answer(
            accessToken: outcome.session.accessToken, expiresIn: outcome.session.expiresIn,
            refreshToken: scopes.contains(.offlineAccess) ? outcome.session.refreshToken.value : nil, idToken: idToken,
            scope: OAuthScope.text(scopes), issuedTokenType: Self.accessTokenType)
    }

    /// An ID token for the client, signed with the tenant's active key: `claims` are what the
    /// scopes granted show of the person.
    func idToken(
        tenant: Tenant, client: OAuthClient, subject: UUID, claims shown: ScopedClaims, sessionID: UUID, idp: String, nonce: String?,
        authTime: Date, accessToken: String, now: Date = Date(), signer: (collection: JWTKeyCollection, kid: String)? = nil
    ) async throws -> String {
        let issuedAt = Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down))
        let claims = IDTokenClaims(
            iss: .init(value: tokens.issuer(for: tenant)), sub: .init(value: subject.lowercasedString),
            aud: .init(value: [client.clientID]),
            exp: .init(value: issuedAt.addingTimeInterval(TimeInterval(tenant.session.accessTokenTTL))), iat: .init(value: issuedAt),
            authTime: Int(authTime.timeIntervalSince1970.rounded(.down)), nonce: nonce, atHash: IDTokenClaims.accessTokenHash(accessToken),
            idp: idp, sid: sessionID.lowercasedString, email: shown.email, emailVerified: shown.emailVerified, name: shown.name,
            givenName: shown.givenName, familyName: shown.familyName)
        let (collection, kid): (JWTKeyCollection, String)
        if let signer { (collection, kid) = signer } else { (collection, kid) = try await tokens.signer(for: tenant, now: now) }
        var header = JWTHeader()
        header.typ = "JWT"
        return try await collection.sign(claims, kid: JWKIdentifier(string: kid), header: header)
    }
}

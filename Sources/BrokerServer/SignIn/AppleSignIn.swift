import BrokerAPI
import BrokerCore
import Foundation
import Logging
import Providers
import Storage

/// Native Sign in with Apple (DESIGN.md "Native Apple sign-in"): verify the identity token for
/// the tenant's client, optionally exchange the authorization code, find or create the account
/// of the team-scoped `sub`, open a session.
struct AppleSignIn: Sendable {
    let database: Database
    let secrets: SecretBox
    let appleKeys: JWKSCache
    let tokenClient: AppleTokenClient
    let clientSecrets: AppleClientSecrets
    let tokens: SessionTokens
    /// (tenant, client id) → client, group and team; cleared by LISTEN/NOTIFY.
    let clients: ExpiringCache<String, ResolvedAppleClient>
    let events: SecurityEventRecorder

    func signIn(tenant: Tenant, _ request: Components.Schemas.AppleSignInRequest, now: Date = Date()) async throws
        -> Components.Schemas.SignInResponse
    {
        guard let resolved = try await resolve(tenant: tenant, clientID: request.clientId) else {
            throw BrokerError(
                code: "unknown_client", kind: .unauthorized, title: "Unknown client",
                detail: "'\(request.clientId.prefix(155))' is not an Apple client of this tenant.",
                hint: "Register it: broker apple client add --tenant \(tenant.slug) --group <primary app id> --client-id \(request.clientId.prefix(155)) --kind app")
        }
        if resolved.client.nonceRequired, (request.nonce ?? "").isEmpty {
            throw BrokerError(
                code: "nonce_required", kind: .badRequest, title: "Nonce required",
                detail: "Client '\(resolved.client.clientID)' requires the raw nonce of the sign-in in `nonce`.",
                hint: "Send the raw nonce the app generated (the app passes its SHA-256 to Apple), or turn the requirement off: broker apple client set --tenant \(tenant.slug) --client-id \(resolved.client.clientID) --no-nonce-required")
        }
        let nonce = NonceExpectation(rawNonce: request.nonce, mode: resolved.client.nonceMode)
        let claims = try await verify(request.identityToken, clientID: resolved.client.clientID, nonce: nonce, now: now)

        let intent = SignInIntent(rawValue: request.intent?.rawValue ?? "auto") ?? .auto
        var appleRefreshToken: KeptRefreshToken?
        if let code = request.authorizationCode, !code.isEmpty {
            // Redeeming a code is irreversible at Apple: first make sure this sign-in can open a
            // session, so that a refused one leaves nothing behind (issue 9 §5).
            try await requireSignInPossible(tenant: tenant, team: resolved.team, subject: claims.subject, intent: intent)
            appleRefreshToken = try await exchange(code: code, resolved: resolved, subject: claims.subject, now: now)
        }

        var (newSession, refreshToken) = tokens.newSession(for: tenant, now: now)
        newSession.identify(
            byReplayKey: claims.replayKey(tenantID: tenant.id, provider: "apple", token: request.identityToken),
            issuedAt: claims.issuedAt)
        let email = claims.email.flatMap { $0.isEmpty ? nil : $0 }
        let signIn = SignInRequest(
            tenantID: tenant.id, provider: "apple", providerScope: resolved.team.teamID, subject: claims.subject,
            email: email, emailVerified: claims.emailVerified ?? false,
            isPrivateEmail: (claims.isPrivateEmail ?? false) || Apple.isPrivateRelay(email),
            name: PersonName(
                givenName: Self.clean(request.user?.name?.firstName), familyName: Self.clean(request.user?.name?.lastName)),
            realUserStatus: claims.realUserStatus, sealedProviderRefreshToken: appleRefreshToken?.sealed,
            intent: intent, clientID: resolved.client.clientID,
            platform: request.platform?.rawValue, session: newSession)
        let outcome: SignInResult?
        do {
            outcome = try await database.accounts.signIn(signIn)
        } catch is IdentityTokenReplayed {
            discard(appleRefreshToken, resolved: resolved)
            events.tokenReplayed(
                tenantID: tenant.id, provider: "apple", clientID: resolved.client.clientID, subject: claims.subject,
                remoteAddress: RequestInfo.current?.remoteAddress)
            throw Self.tokenReplayed
        } catch {
            discard(appleRefreshToken, resolved: resolved)
            throw error
        }
        guard let result = outcome else {
            discard(appleRefreshToken, resolved: resolved)
            if signIn.intent == .signIn { throw Self.accountNotFound }
            throw Self.accountDisabled
        }
        let access = try await tokens.accessToken(
            tenant: tenant, accountID: result.account.id, sessionID: result.sessionID, idp: "apple",
            clientID: resolved.client.clientID, now: now)
        return .init(
            account: .init(result.account), identity: .init(result.identity), isNewAccount: result.isNewAccount,
            session: tokens.response(accessToken: access.token, expiresIn: access.expiresIn, refreshToken: refreshToken))
    }

    static let accountNotFound = BrokerError(
        code: "account_not_found", kind: .notFound, title: "No account for this identity",
        detail: "This Apple identity has no account yet and the intent was sign_in; nothing was created.",
        hint: "Use intent sign_up or auto to create the account.")

    static let accountDisabled = BrokerError(
        code: "account_disabled", kind: .forbidden, title: "Account not active",
        detail: "The account linked to this identity is disabled or deleted.")

    static let tokenReplayed = BrokerError(
        code: "token_replayed", kind: .unauthorized, title: "Identity token already used",
        detail: "This identity token (or another with the same jti) has already signed in; each is accepted once.",
        hint: "Get a fresh identity token from the provider (a new sign-in on the device) and send it once.")

    private func resolve(tenant: Tenant, clientID: String) async throws -> ResolvedAppleClient? {
        let key = "\(tenant.id):\(clientID)"
        if let cached = clients.value(for: key) { return cached }
        guard let resolved = try await database.apple.resolve(tenantID: tenant.id, clientID: clientID) else { return nil }
        clients.set(resolved, for: key)
        return resolved
    }

    func verify(_ token: String, clientID: String, nonce: NonceExpectation, now: Date) async throws -> IdentityClaims {
        let verifier = IdentityTokenVerifier(
            policy: VerificationPolicy(issuers: [Apple.issuer], algorithms: ["RS256"], audiences: [clientID]), keys: appleKeys)
        do {
            return try await verifier.verify(token, nonce: nonce, at: now)
        } catch where error.isProviderUnavailable {
            throw BrokerError(
                code: error.code, kind: .unavailable, title: "Apple unreachable",
                detail: "Apple's signing keys could not be fetched and none are cached, so the identity token cannot be checked now.",
                hint: "Retry shortly; the broker refetches Apple's keys every second until it has them.")
        } catch {
            throw BrokerError(code: error.code, kind: .unauthorized, title: "Identity token rejected", detail: error.message)
        }
    }

    /// Refuses, before a code is redeemed, a sign-in that would open no session: an unknown
    /// identity with intent `sign_in`, or an account that is not active.
    private func requireSignInPossible(tenant: Tenant, team: AppleTeam, subject: String, intent: SignInIntent) async throws {
        let status = try await database.accounts.accountStatus(
            tenantID: tenant.id, provider: "apple", providerScope: team.teamID, subject: subject)
        switch status {
        case nil: if intent == .signIn { throw Self.accountNotFound }
        case .active?: break
        case .disabled?, .deleted?: throw Self.accountDisabled
        }
    }

    /// Apple's refresh token from a code exchange, raw (to revoke it if the sign-in fails) and
    /// sealed (to store).
    struct KeptRefreshToken: Sendable {
        let raw: String
        let sealed: Data
    }

    /// Exchanges the code at Apple (client id = the posted client) and returns Apple's refresh
    /// token when it is proven to be this user's: the id token Apple returns with it must
    /// verify and name the same `sub`. A refresh token that is not proven is revoked at Apple,
    /// never kept; one that belongs to another user fails the sign-in.
    private func exchange(code: String, resolved: ResolvedAppleClient, subject: String, now: Date) async throws
        -> KeptRefreshToken?
    {
        let clientID = resolved.client.clientID
        let secret = try await clientSecrets.secret(team: resolved.team, clientID: clientID)
        let answer = try await tokenClient.exchange(code: code, clientID: clientID, clientSecret: secret)
        guard let refreshToken = answer.refreshToken, !refreshToken.isEmpty else { return nil }
        guard let idToken = answer.idToken else {
            revokeLater(refreshToken, resolved: resolved, reason: "Apple's answer carried no id_token")
            return nil
        }
        let codeSubject: String
        do {
            codeSubject = try await verify(idToken, clientID: clientID, nonce: .notChecked, now: now).subject
        } catch {
            revokeLater(refreshToken, resolved: resolved, reason: "Apple's id_token did not verify")
            return nil
        }
        guard codeSubject == subject else {
            revokeLater(refreshToken, resolved: resolved, reason: "the code belongs to another user")
            throw BrokerError(
                code: "subject_mismatch", kind: .badRequest, title: "Code belongs to another user",
                detail: "The authorization code was issued for another Apple user than the identity token.")
        }
        let sealed = try secrets.seal(
            Data(refreshToken.utf8),
            context: "apple_refresh:\(resolved.team.tenantID.lowercasedString):\(resolved.team.teamID):\(subject)")
        return KeptRefreshToken(raw: refreshToken, sealed: sealed)
    }

    /// A refresh token redeemed for a sign-in that then failed is not kept: revoke it.
    private func discard(_ token: KeptRefreshToken?, resolved: ResolvedAppleClient) {
        guard let token else { return }
        revokeLater(token.raw, resolved: resolved, reason: "the sign-in did not complete")
    }

    /// Revokes at Apple in the background (the answer to the client does not wait for Apple);
    /// a failure is logged, without the token.
    private func revokeLater(_ refreshToken: String, resolved: ResolvedAppleClient, reason: String) {
        let logger = database.logger
        let (tokenClient, clientSecrets) = (tokenClient, clientSecrets)
        let (team, clientID) = (resolved.team, resolved.client.clientID)
        Task {
            do {
                let secret = try await clientSecrets.secret(team: team, clientID: clientID)
                try await tokenClient.revoke(refreshToken: refreshToken, clientID: clientID, clientSecret: secret)
                logger.notice("revoked an Apple refresh token the broker does not keep", metadata: ["reason": "\(reason)", "client_id": "\(clientID)"])
            } catch {
                logger.warning(
                    "could not revoke an Apple refresh token the broker does not keep",
                    metadata: ["reason": "\(reason)", "client_id": "\(clientID)", "error": "\(error)"])
            }
        }
    }

    static func clean(_ value: String?) -> String? {
        guard let trimmed = value?.trimmingCharacters(in: .whitespacesAndNewlines), !trimmed.isEmpty else { return nil }
        return String(trimmed.prefix(200))
    }
}

extension Components.Schemas.Account {
    init(_ account: Account) {
        self.init(
            id: account.id.lowercasedString, email: account.email, emailVerified: account.emailVerified,
            isPrivateEmail: account.isPrivateEmail,
            name: account.name.isEmpty ? nil : .init(givenName: account.name.givenName, familyName: account.name.familyName),
            status: .init(rawValue: account.status.rawValue) ?? .disabled, createdAt: account.createdAt,
            lastSeenAt: account.lastSeenAt)
    }
}

extension Components.Schemas.IdentityInfo {
    init(_ identity: Identity) {
        self.init(
            id: identity.id.lowercasedString, provider: .init(rawValue: identity.provider) ?? .apple,
            providerScope: identity.providerScope, subject: identity.subject, email: identity.email,
            emailVerified: identity.emailVerified, isPrivateEmail: identity.isPrivateEmail,
            relayEmailDeliverable: identity.relayEmailDeliverable, realUserStatus: identity.realUserStatus,
            hasProviderRefreshToken: identity.hasProviderRefreshToken, createdAt: identity.createdAt,
            lastSignInAt: identity.lastSignInAt)
    }
}

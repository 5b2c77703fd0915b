import BrokerCore
import Foundation
import JWTKit
import Logging
import Providers
import Storage

/// What a sign-in produced: the account, the identity it came through, and the session.
package struct SignInOutcome: Sendable {
    package let account: Account
    package let identity: Identity
    package let isNewAccount: Bool
    package let linkedBy: LinkedBy?
    package let possibleDuplicate: Bool
    package let session: IssuedSession
    package let sessionID: UUID
}

/// A broker session as handed to the client: the access token and the refresh token.
package struct IssuedSession: Sendable {
    package let accessToken: String
    package let expiresIn: Int
    package let refreshToken: RefreshToken
    /// The session a refresh rotated (nil for a sign-in's: its outcome says).
    package var session: SessionRepository.SessionInfo? = nil
}

/// The relying party a sign-in of the tenant's OpenID Provider opens its session for, and the
/// scope granted (decision 0082).
package struct RelyingPartySession: Sendable, Equatable {
    package let clientID: String
    package let scope: String

    package init(clientID: String, scope: String) {
        self.clientID = clientID
        self.scope = scope
    }
}

/// The one sign-in of every provider and route (decision 0024): resolve the client
/// and verify the proof (the provider), redeem an authorization code when the provider can,
/// find or create the account and identity, open the session, sign the access token. Used by
/// `POST /v1/sign-in/{provider}`; later by the web callback, notifications and imports.
package struct SignInService: Sendable {
    package let database: Database
    package let providers: ProviderRegistry
    package let store: ProviderSettingsStore
    package let tokens: SessionTokens
    package let events: SecurityEventRecorder
    /// Counts sign-ins through non-qualifying providers of tenants in violation of guideline 4.8.
    package let loginCatalogs: LoginCatalogStore?

    package func signIn(
        tenant: Tenant, provider name: ProviderID, type registered: ProviderRegistry.Registered, proof: ProviderProof,
        intent: SignInIntent, platform: String?, relyingParty: RelyingPartySession? = nil, context: OperationContext,
        now: Date = Date()
    ) async throws -> SignInOutcome {
        let verification = try await registered.entry.verify(proof, name, tenant.id, store, now)
        let verified = verification.verified
        let identity = verified.identity

        var kept: KeptProviderToken?
        if let code = proof.authorizationCode, !code.isEmpty, let exchange = verification.exchangeCode {
            // Redeeming a code is irreversible at the provider: first make sure this sign-in can
            // open a session, so that a refused one leaves nothing behind (issue 9 §5).
            try await adoptTransferredIdentity(tenantID: tenant.id, verified: verified)
            try await requireSignInPossible(tenant: tenant, identity: identity, intent: intent)
            kept = try await exchange(code, now)
        }
        return try await complete(
            tenant: tenant, provider: name, verified: verified, kept: kept, revokeLater: verification.revokeLater, intent: intent,
            platform: platform, relyingParty: relyingParty, context: context, now: now)
    }

    /// The sign-in after the provider vouched for the identity (a native proof, or a web
    /// sign-in's broker code): find or create the account and identity, open the session, sign
    /// the access token. A kept provider token is given back when no session opens.
    package func complete(
        tenant: Tenant, provider name: ProviderID, verified: VerifiedProof, kept: KeptProviderToken?,
        revokeLater: (@Sendable (KeptProviderToken, String) -> Void)?, intent: SignInIntent, platform: String?,
        relyingParty: RelyingPartySession? = nil, context: OperationContext, now: Date
    ) async throws -> SignInOutcome {
        let signer: (collection: JWTKeyCollection, kid: String)
        do {
            signer = try await tokens.signer(for: tenant, now: now)
        } catch {
            if let kept, let revokeLater { revokeLater(kept, "the sign-in did not complete") }
            throw error
        }
        let (result, refreshToken) = try await openSession(
            tenant: tenant, provider: name, verified: verified, kept: kept, revokeLater: revokeLater, intent: intent,
            platform: platform, relyingParty: relyingParty, context: context, now: now)
        let access = try await tokens.accessToken(
            tenant: tenant, accountID: result.account.id, sessionID: result.sessionID, idp: verified.identity.provider.rawValue,
            clientID: relyingParty?.clientID ?? verified.clientID, scope: relyingParty?.scope, now: now, signer: signer)
        return SignInOutcome(
            account: result.account, identity: result.identity, isNewAccount: result.isNewAccount, linkedBy: result.linkedBy,
            possibleDuplicate: result.possibleDuplicate,
            session: IssuedSession(accessToken: access.token, expiresIn: access.expiresIn, refreshToken: refreshToken),
            sessionID: result.sessionID)
    }

    /// The sign-in without its access token: find or create the account and identity, open the
    /// session with the refresh token `makeRefreshToken` gives for its id (random by default).
    /// A relying party's sign-in at the provider's callback stops here (decision 0085): its
    /// tokens are signed when the client redeems the code. A kept provider token is given back
    /// when no session opens.
    package func openSession(
        tenant: Tenant, provider name: ProviderID, verified: VerifiedProof, kept: KeptProviderToken?,
        revokeLater: (@Sendable (KeptProviderToken, String) -> Void)?, intent: SignInIntent, platform: String?,
        relyingParty: RelyingPartySession? = nil, makeRefreshToken: (UUID) -> RefreshToken = RefreshToken.generate(sessionID:),
        keepCode: ((UUID) throws -> KeptCode)? = nil, context: OperationContext, now: Date
    ) async throws -> (result: SignInResult, refreshToken: RefreshToken) {
        let identity = verified.identity
        let giveBack = { (reason: String) in
            if let kept, let revokeLater { revokeLater(kept, reason) }
        }

        do {
            try await adoptTransferredIdentity(tenantID: tenant.id, verified: verified)
        } catch {
            giveBack("the sign-in did not complete")
            throw error
        }
        var newSession = tokens.newSession(for: tenant, now: now)
        newSession.oauthClientID = relyingParty?.clientID
        newSession.oauthScope = relyingParty?.scope
        if let replayKey = verified.replayKey {
            newSession.identify(byReplayKey: replayKey, issuedAt: verified.replayKeyCoversIssueTime ? verified.issuedAt : nil)
        }
        let refreshToken = newSession.issueRefreshToken(makeRefreshToken)
        var request = SignInRequest(
            tenantID: tenant.id, identity: identity, sealedProviderRefreshToken: kept?.sealed, intent: intent,
            clientID: verified.clientID, platform: platform, session: newSession,
            autoLinkByEmail: tenant.linking.autoLinkVerifiedEmail && identity.mayAutoLinkByEmail,
            maxOpenSessions: tenant.session.maxSessionsPerAccount)
        let outcome: SignInResult?
        do {
            // A relying party's code names the session: made once its id is final.
            request.keptCode = try keepCode?(newSession.id)
            outcome = try await database.accounts.signIn(request)
        } catch is IdentityTokenReplayed {
            giveBack("the sign-in did not complete")
            events.tokenReplayed(
                tenantID: tenant.id, provider: identity.provider.rawValue, clientID: verified.clientID, subject: identity.subject,
                remoteAddress: context.remoteAddress)
            throw SignInFailure.tokenReplayed
        } catch {
            giveBack("the sign-in did not complete")
            throw error
        }
        guard let result = outcome else {
            giveBack("the sign-in did not complete")
            throw intent == .signIn ? SignInFailure.accountNotFound(identity.provider) : SignInFailure.accountDisabled
        }
        await loginCatalogs?.noteSignIn(tenant: tenant, provider: name, platform: platform, logger: context.logger)
        return (result, refreshToken)
    }

    /// A sign-in of an Apple team transfer's window carries the new team's `sub` and the
    /// `transfer_sub` an export kept on the person's identity: that identity is re-keyed onto
    /// the new team first, so the sign-in finds it (and its account) instead of creating one.
    func adoptTransferredIdentity(tenantID: UUID, verified: VerifiedProof) async throws {
        guard let transfer = verified.transferSubject, verified.identity.provider == .apple else { return }
        _ = try await database.appleTransfers.adopt(
            tenantID: tenantID, transferSub: transfer, targetTeam: verified.identity.providerScope, subject: verified.identity.subject)
    }

    /// Refuses, before a code is redeemed, a sign-in that would open no session: an unknown
    /// identity with intent `sign_in`, or an account that is not active.
    package func requireSignInPossible(tenant: Tenant, identity: ProviderIdentity, intent: SignInIntent) async throws {
        try await requireSignInPossible(tenantID: tenant.id, identity: identity, intent: intent)
    }

    package func requireSignInPossible(tenantID: UUID, identity: ProviderIdentity, intent: SignInIntent) async throws {
        let status = try await database.accounts.accountStatus(
            tenantID: tenantID, provider: identity.provider.rawValue, providerScope: identity.providerScope,
            subject: identity.subject)
        try Self.requireSignInPossible(status: status, provider: identity.provider, intent: intent)
    }

    /// Whether a sign-in with `intent` can open a session for an identity whose account has
    /// `status` (nil: no account yet).
    package static func requireSignInPossible(status: AccountStatus?, provider: ProviderID, intent: SignInIntent) throws {
        switch status {
        case nil: if intent == .signIn { throw SignInFailure.accountNotFound(provider) }
        case .active?: break
        case .disabled?, .deleted?: throw SignInFailure.accountDisabled
        }
    }
}

import BrokerCore
import Foundation
import JWTKit
import Logging
import Providers
import Storage

/// Linking and unlinking provider identities (decision 0025): only with
/// proof of both sides, the account's live session (`X-Account-Token`) and a fresh provider
/// proof verified exactly as that provider's sign-in verifies it. Never a merge: an identity
/// another account holds is a conflict naming that account.
package struct IdentityLinkService: Sendable {
    package let database: Database
    package let providers: ProviderRegistry
    package let store: ProviderSettingsStore
    package let tokens: SessionTokens
    /// Records a proof presented again (401 token_replayed), as sign-in does.
    package let events: SecurityEventRecorder?

    /// The account of the path, once `X-Account-Token` proves it: a well-signed, unexpired
    /// access token of this tenant whose `sub` is that account and whose session is live (and
    /// whose account is active). A well-signed token of a disabled account is 403
    /// `account_disabled` rather than 401, whether or not its session was revoked with the
    /// disabling: the caller showed the account's token and gets to know why it is refused.
    package func requireAccountToken(_ header: String?, tenant: Tenant, accountID rawID: String) async throws -> UUID {
        guard let token = header?.trimmingCharacters(in: .whitespaces), !token.isEmpty,
            let accountID = UUID(uuidString: rawID),
            let claims = await tokens.verifyAccessToken(token, tenant: tenant),
            claims.sub.value == accountID.lowercasedString,
            let sessionID = UUID(uuidString: claims.sid)
        else { throw LinkFailure.invalidAccountToken }
        guard let session = try await database.sessions.liveSession(tenantID: tenant.id, sessionID: sessionID),
            session.accountID == accountID
        else {
            switch try await database.accountStatuses.status(tenantID: tenant.id, accountID: accountID) {
            case .disabled?, .deleted?: throw LinkFailure.accountDisabled
            case .active?, nil: throw LinkFailure.invalidAccountToken
            }
        }
        return accountID
    }

    /// Links the identity the proof shows to the account. `created` is false when it was linked
    /// to this account already (nothing changed).
    package func link(
        tenant: Tenant, accountID: UUID, provider name: ProviderID, type registered: ProviderRegistry.Registered, proof: ProviderProof,
        context: OperationContext, now: Date = Date()
    )
        async throws -> (account: Account, identity: Identity, created: Bool)
    {
        let verification = try await registered.entry.verify(proof, name, tenant.id, store, now)
        let identity = verification.verified.identity
        let links = database.identityLinks

        // An authorization code is redeemed (irreversibly, at the provider) only for an identity
        // no account holds yet, so that a refused link leaves nothing behind.
        var kept: KeptProviderToken?
        if let code = proof.authorizationCode, !code.isEmpty, let exchange = verification.exchangeCode {
            switch try await links.owner(tenantID: tenant.id, identity: identity) {
            case nil: kept = try await exchange(code, now)
            case accountID?: break
            case let other?: throw LinkFailure.identityAlreadyLinked(accountID: other)
            }
        }
        // The proof is spent by the link (decision 0031): the session id a sign-in with this
        // token would take, so that the token is accepted once across sign-in and linking.
        var spent: IdentityLinkRepository.SpentProof?
        if let replayKey = verification.verified.replayKey {
            var session = tokens.newSession(for: tenant, now: now)
            session.identify(
                byReplayKey: replayKey,
                issuedAt: verification.verified.replayKeyCoversIssueTime ? verification.verified.issuedAt : nil)
            spent = .init(sessionID: session.id, clientID: verification.verified.clientID, expiresAt: session.expiresAt)
        }
        let outcome: IdentityLinkRepository.LinkOutcome
        do {
            outcome = try await links.link(
                tenantID: tenant.id, accountID: accountID, identity: identity, sealedProviderRefreshToken: kept?.sealed,
                providerTokenClientID: verification.verified.clientID, actor: "account:\(accountID.lowercasedString)", spending: spent)
        } catch is IdentityTokenReplayed {
            if let kept, let revoke = verification.revokeLater { revoke(kept, "the link did not complete") }
            events?.tokenReplayed(
                tenantID: tenant.id, provider: identity.provider.rawValue, clientID: verification.verified.clientID,
                subject: identity.subject, remoteAddress: context.remoteAddress)
            throw SignInFailure.tokenReplayed
        } catch {
            if let kept, let revoke = verification.revokeLater { revoke(kept, "the link did not complete") }
            throw error
        }
        let linked: Identity
        let created: Bool
        switch outcome {
        case .linked(let identity): (linked, created) = (identity, true)
        case .alreadyLinked(let identity): (linked, created) = (identity, false)
        case .linkedElsewhere(let other):
            // Lost a race for the identity. A provider token redeemed meanwhile is dropped, not
            // revoked: revoking it would end the provider authorization the other account relies on.
            throw LinkFailure.identityAlreadyLinked(accountID: other)
        case .accountNotFound: throw LinkFailure.accountNotFound
        case .accountNotActive: throw LinkFailure.accountDisabled
        }
        if created {
            context.logger.info(
                "identity linked", metadata: ["provider": "\(name.rawValue)", "account_id": "\(accountID.lowercasedString)"])
        }
        return (try await account(tenant: tenant, id: accountID), linked, created)
    }

    /// Unlinks the identity and revokes the sessions opened through it.
    package func unlink(tenant: Tenant, accountID: UUID, identityID rawID: String, context: OperationContext) async throws
        -> (account: Account, identity: Identity, revokedSessions: Int)
    {
        guard let identityID = UUID(uuidString: rawID) else { throw LinkFailure.identityNotFound }
        switch try await database.identityLinks.unlink(
            tenantID: tenant.id, accountID: accountID, identityID: identityID, actor: "account:\(accountID.lowercasedString)")
        {
        case .unlinked(let identity, let revoked):
            context.logger.info(
                "identity unlinked",
                metadata: [
                    "provider": "\(identity.provider)", "account_id": "\(accountID.lowercasedString)", "revoked_sessions": "\(revoked)",
                ])
            return (try await account(tenant: tenant, id: accountID), identity, revoked)
        case .accountNotFound: throw LinkFailure.accountNotFound
        case .accountNotActive: throw LinkFailure.accountDisabled
        case .identityNotFound: throw LinkFailure.identityNotFound
        case .lastIdentity: throw LinkFailure.lastIdentity
        }
    }

    private func account(tenant: Tenant, id: UUID) async throws -> Account {
        guard let (account, _) = try await database.accounts.find(tenantID: tenant.id, accountID: id) else {
            throw LinkFailure.accountNotFound
        }
        return account
    }
}

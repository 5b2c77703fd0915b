import BrokerCore
import Crypto
import Foundation
import Logging
import Providers
import Storage
import Synchronization

/// Sign-in on the web (issue 22, decision 0038): three calls and no cookies for a product's web
/// page. `start` seals the sign-in into a fresh state (decision 0099) and hands back the
/// provider's authorize URL; the provider sends the person to the broker's callback, which
/// verifies what came back, redeems the code and keeps the verified sign-in under a broker code
/// on the return URL; the product's backend exchanges that code once, within a minute, for the
/// same answer as a native sign-in.
package struct WebSignInService: Sendable {
    package let database: Database
    package let providers: ProviderRegistry
    package let store: ProviderSettingsStore
    package let signIn: SignInService
    package let secrets: SecretBox
    package let events: SecurityEventRecorder
    /// The tenants by id: a relying party's sign-in completes at the callback (decision 0085).
    package let tenants: TenantDirectory
    /// The keys the nonce and the PKCE verifier are derived from the state with (decision 0038),
    /// derived from the master key once per process.
    package let keys: Keys
    /// The repeats of callbacks in flight this process has waited for (decision 0069).
    package let repeats: Repeats

    package struct Keys: Sendable {
        let nonce: SymmetricKey
        let pkce: SymmetricKey
        /// The broker code a callback answers with is derived from its state (decision 0069),
        /// so a repeat of the callback hands back the same one.
        let code: SymmetricKey
        /// The first refresh token of a relying party's session is derived from its
        /// authorization code (decision 0085), so that it is stored only as a hash.
        let refreshToken: SymmetricKey

        package init(secrets: SecretBox) {
            nonce = secrets.derivedKey(purpose: "web-sign-in-nonce")
            pkce = secrets.derivedKey(purpose: "web-sign-in-pkce")
            code = secrets.derivedKey(purpose: "web-sign-in-code")
            refreshToken = secrets.derivedKey(purpose: "authorization-code-refresh-token")
        }
    }

    /// Counts the callbacks that found their state claimed by another still in flight and waited
    /// for its answer (decision 0069).
    package final class Repeats: Sendable {
        private let count = Mutex(0)

        package init() {}

        package var waited: Int { count.withLock { $0 } }

        func record() { count.withLock { $0 += 1 } }
    }

    /// How long a started sign-in waits for the provider's callback.
    package static let stateLifetime: TimeInterval = 600
    /// How long a broker code waits for its exchange.
    package static let codeLifetime: TimeInterval = 60
    /// How long a callback's claim on its state lasts outside a request's deadline (a request
    /// claims it until its own deadline), and how often a repeat looks at the state it waits for.
    package static let claimLifetime: Duration = .seconds(30)
    package static let repeatPoll: Duration = .milliseconds(50)
    /// The longest `state` the caller may pass through, and the longest return URL.
    package static let maxCallerState = 512
    package static let maxReturnURL = 2_048

    package struct Started: Sendable, Equatable {
        package let authorizeURL: String
        package let expiresAt: Date
    }

    /// Which callback route the provider came back to: Apple's `form_post`, or an OpenID
    /// Connect provider's redirect.
    package enum CallbackRoute: Sendable {
        case apple
        case oidc
    }

    /// Where the person's browser goes after the callback.
    package enum CallbackOutcome: Sendable, Equatable {
        /// 303 to the return URL (with `code` or `error`, and the caller's `state`).
        case redirect(String)
        /// The state is unknown, used or expired: a plain 400 page; nothing was created.
        case invalidState
        /// The broker's database did not answer: the state could not be read (a plain 503 page).
        case unavailable
    }

    // MARK: Start

    /// Starts a web sign-in. For a relying party of the tenant's OpenID Provider (decision 0082),
    /// `relyingParty` names it and what it asked; `returnURL` is then its redirect URI, already
    /// checked against its registration, and the provider's first web client serves when it has
    /// several and none is named.
    package func start(
        tenant: Tenant, provider: ProviderID, clientID: String?, returnURL: String, callerState: String?, intent: SignInIntent,
        relyingParty: WebSignInState.RelyingParty? = nil, context: OperationContext, now: Date = Date()
    ) async throws -> Started {
        try await TenantScope.tenant(tenant.id) {
            let registered = try await store.registered(provider, tenantID: tenant.id, in: providers)
            guard registered.descriptor.abilities.contains(.webAuthorization), let webClient = registered.entry.webClient else {
                throw WebSignInFailure.notSupported(provider)
            }
            let client: WebClient
            do {
                do {
                    client = try await webClient(clientID, provider, tenant.id, store)
                } catch WebClientFailure.unknownClient(_, nil, let candidates) where relyingParty != nil && !candidates.isEmpty {
                    client = try await webClient(candidates[0], provider, tenant.id, store)
                }
            } catch let failure as WebClientFailure {
                switch failure {
                case .notSupported(let id): throw WebSignInFailure.notSupported(id)
                case .unknownClient(let id, let clientID, let candidates):
                    throw WebSignInFailure.unknownClient(id, clientID: clientID, candidates: candidates)
                }
            } catch ProviderFailure.unknownClient(let id, let clientID) {
                throw WebSignInFailure.unknownClient(id, clientID: clientID, candidates: [])
            }
            guard relyingParty != nil || client.returnURLs.contains(returnURL) else {
                throw WebSignInFailure.returnURLNotRegistered(provider, clientID: client.clientID)
            }
            // The sign-in travels sealed in its state, which names its tenant; nothing is written
            // until its callback claims it (decisions 0092, 0099).
            let expiresAt = now.addingTimeInterval(Self.stateLifetime)
            let state = try SealedWebSignInState.seal(
                WebSignInState(
                    stateHash: Data(), tenantID: tenant.id, provider: provider.rawValue, clientID: client.clientID,
                    redirectURI: client.redirectURI, returnURL: returnURL, intent: intent, callerState: callerState, expiresAt: expiresAt,
                    providerScope: client.providerScope, relyingParty: relyingParty),
                secrets: secrets)
            return Started(authorizeURL: client.authorizationURL(request(for: state)), expiresAt: expiresAt)
        }
    }

    // MARK: Callback

    /// The provider's callback. Never throws: every outcome is a page or a redirect that shows
    /// no token, email or internal detail; what went wrong is logged (and, for what the operator
    /// must fix, audited).
    package func callback(
        route: CallbackRoute, state: String?, providerError: String?, response: AuthorizationResponse, context: OperationContext,
        now: Date = Date()
    ) async -> CallbackOutcome {
        guard let state, !state.isEmpty, state.utf8.count <= WebSignInStateToken.maxLength else { return .invalidState }
        // A sealed state (decision 0099) must open and be live; one of an older form is a row.
        var sealed: WebSignInState?
        if let (tenantID, box) = WebSignInStateToken.sealedBox(of: state) {
            guard let opened = SealedWebSignInState.open(state, tenantID: tenantID, box: box, secrets: secrets), opened.expiresAt > now
            else { return .invalidState }
            sealed = opened
        }
        let stateHash = sealed?.stateHash ?? Self.hash(state)
        let code = Self.derive(state, keys.code)
        let stored: WebSignInState
        let account: SubjectAccountStatus?
        switch await claim(
            state: stateHash, tenant: WebSignInStateToken.tenant(of: state), sealed: sealed, code: code, route: route,
            idToken: response.idToken, context: context, now: now)
        {
        case .claimed(let found):
            (stored, account) = found
            // The state says whose sign-in this is: the rest of the callback is that tenant's.
            RequestTenantScope.settle(found.state.tenantID)
        case .answered(let outcome):
            return outcome
        }
        guard let provider = ProviderID(rawValue: stored.provider), (provider == .apple) == (route == .apple) else { return .invalidState }
        let relyingParty = stored.relyingParty?.request
        // A callback that ends in an error answers its state with it, for a repeat (best effort:
        // the claim lapses anyway).
        let fail = { [database] (error: String) -> CallbackOutcome in
            _ = try? await database.webSignIns.answerState(hash: stateHash, tenantID: stored.tenantID, error: error)
            return Self.sendBack(to: stored.returnURL, callerState: stored.callerState, relyingParty: relyingParty, .error(error))
        }
        if let providerError { return await fail(Self.shownError(providerError)) }
        do {
            let registered = try await store.registered(provider, tenantID: stored.tenantID, in: providers)
            guard let webClient = registered.entry.webClient else { return await fail("web_flow_not_supported") }
            let client = try await webClient(stored.clientID, provider, stored.tenantID, store)
            let (tenantID, intent, signIn) = (stored.tenantID, stored.intent, signIn)
            let scope = stored.providerScope
            // Intent is resolved before a code is redeemed (issue 9 §5): from the status read with
            // the state when it is this identity's, else from the database. A relying party's
            // sign-in through a provider whose code is already redeemed when the identity is
            // known leaves it to its sign-in statement, which refuses the same accounts with the
            // same answer (decision 0101).
            let signsInNext = stored.relyingParty != nil && intent != .signIn && client.identityFollowsRedemption
            let verification = try await client.complete(
                response, request(for: state), stored.tenantID,
                { identity in
                    if let account, account.subject == identity.subject, identity.providerScope == scope, identity.provider == provider {
                        try SignInService.requireSignInPossible(status: account.status, provider: identity.provider, intent: intent)
                    } else if !signsInNext {
                        try await signIn.requireSignInPossible(tenantID: tenantID, identity: identity, intent: intent)
                    }
                }, now)
            if let party = stored.relyingParty {
                return try await signInRelyingParty(
                    party, verification: verification, stored: stored, provider: provider, code: code, context: context, now: now)
            }
            let kept: Bool
            do {
                let sealed = try secrets.seal(
                    WebSignInGrant(verification, intent: stored.intent).json,
                    context: WebSignInGrant.sealingContext(tenantID: stored.tenantID, provider: provider))
                kept = try await database.webSignIns.takeState(
                    hash: stateHash, tenantID: stored.tenantID, keepingGrant: sealed, codeHash: Self.hash(code),
                    codeExpiresAt: now.addingTimeInterval(Self.codeLifetime),
                    now: now)
            } catch {
                if let token = verification.kept { verification.revokeLater?(token, "the web sign-in could not be kept") }
                throw error
            }
            guard kept else {
                // Another callback with this state answered first (its claim lapsed meanwhile),
                // or it expired.
                if let token = verification.kept { verification.revokeLater?(token, "the state was answered by another callback") }
                return .invalidState
            }
            return Self.sendBack(to: stored.returnURL, callerState: stored.callerState, relyingParty: relyingParty, .code(code))
        } catch {
            return await fail(callbackError(error, stored: stored, provider: provider, context: context))
        }
    }

    /// A relying party's sign-in at the callback (decision 0085): the person signs in here, as a
    /// native sign-in of the same identity would, and the session opens for the client with the
    /// refresh token its authorization code derives; the code then names the session and keeps,
    /// sealed, what the token endpoint answers it with.
    private func signInRelyingParty(
        _ party: WebSignInState.RelyingParty, verification: WebVerification, stored: WebSignInState, provider: ProviderID,
        code: String, context: OperationContext, now: Date
    ) async throws -> CallbackOutcome {
        let verified = verification.verified
        let tenant: Tenant
        do {
            guard let found = try await tenants.tenant(id: stored.tenantID), found.status == .active else {
                throw TenantNotActive()
            }
            tenant = found
        } catch {
            if let token = verification.kept { verification.revokeLater?(token, "the sign-in did not complete") }
            throw error
        }
        let session = RelyingPartySession(clientID: party.clientID, scope: OAuthScope.text(party.request.scopes))
        let refreshKey = keys.refreshToken
        let codeHash = Self.hash(code)
        let codeExpiresAt = now.addingTimeInterval(Self.codeLifetime)
        let relyingParty = AuthorizationCodeGrant.RelyingParty(
            clientID: party.clientID, redirectURI: stored.returnURL, request: party.request, authTime: now)
        let idp = verified.identity.provider.rawValue
        // The code's grant names the session; the sign-in keeps it in its commit (decision 0100).
        let sealGrant = { [secrets] (sessionID: UUID) throws -> Data in
            try secrets.seal(
                AuthorizationCodeGrant(relyingParty: relyingParty, sessionID: sessionID, idp: idp).json,
                context: AuthorizationCodeGrant.sealingContext(tenantID: tenant.id))
        }
        let (result, _) = try await signIn.openSession(
            tenant: tenant, provider: provider, verified: verified, kept: verification.kept, revokeLater: verification.revokeLater,
            intent: stored.intent, platform: "web", relyingParty: session,
            makeRefreshToken: { RefreshToken.derived(sessionID: $0, from: code, key: refreshKey) },
            keepCode: { sessionID in
                KeptCode(
                    stateHash: stored.stateHash, codeHash: codeHash, grantSealed: try sealGrant(sessionID), expiresAt: codeExpiresAt,
                    now: now)
            }, context: context, now: now)
        let kept: Bool
        if let codeKept = result.codeKept {
            kept = codeKept
        } else {
            // The statement that opened the session kept no code for it (the full statement, or
            // a batch past its first eight codes): the code is kept on its own, the sign-in
            // committed.
            do {
                kept = try await database.webSignIns.takeState(
                    hash: stored.stateHash, tenantID: tenant.id, keepingGrant: try sealGrant(result.sessionID), codeHash: codeHash,
                    codeExpiresAt: codeExpiresAt, sessionID: result.sessionID, now: now)
            } catch {
                await endUnanswered(result.sessionID, tenantID: tenant.id, context: context)
                throw error
            }
        }
        guard kept else {
            // Another callback with this state answered first (its claim lapsed meanwhile), or
            // it expired: the session nobody will hold ends.
            await endUnanswered(result.sessionID, tenantID: tenant.id, context: context)
            return .invalidState
        }
        return Self.sendBack(to: stored.returnURL, callerState: stored.callerState, relyingParty: party.request, .code(code))
    }

    /// Ends a relying party's session whose code was never handed out (best effort: the code's
    /// sweep would not find it, and nobody holds its tokens).
    private func endUnanswered(_ sessionID: UUID, tenantID: UUID, context: OperationContext) async {
        do {
            try await TenantScope.tenant(tenantID) {
                _ = try await database.sessions.revoke(tenantID: tenantID, sessionID: sessionID, reason: "authorization_code_not_issued")
            }
        } catch {
            context.logger.warning(
                "web sign-in callback: a session whose code was not handed out could not be ended",
                metadata: ["session_id": "\(sessionID.lowercasedString)"])
        }
    }

    /// The tenant of a relying party's sign-in was turned off while the person was at the
    /// provider.
    private struct TenantNotActive: Error {}

    private enum Claim {
        case claimed((state: WebSignInState, account: SubjectAccountStatus?))
        /// Not this callback's to finish: the state is unknown or expired, or a repeat's answer.
        case answered(CallbackOutcome)
    }

    /// Claims the callback's state (decision 0069), or answers a repeat the way the callback it
    /// repeats was answered: the same broker code while it waits for its exchange, the same
    /// error; a repeat of a callback still in flight waits for its answer, within the request's
    /// deadline. A claim lasts until the request's deadline; one that lapsed unanswered (its
    /// process stopped) is claimed again. `stateTenant`: the tenant the state's text names, in
    /// whose scope it is read (nil: a state of the oldest form, read across tenants). `sealed`:
    /// the sign-in a sealed state carries, written by its first claim (decision 0099).
    private func claim(
        state stateHash: Data, tenant stateTenant: UUID?, sealed: WebSignInState?, code: String, route: CallbackRoute,
        idToken: String?, context: OperationContext, now: Date
    ) async -> Claim {
        // With the state, the status of the account of the posted id token's subject (Apple),
        // read ahead of the token's verification and used only once it verified (decision 0039).
        let subject = idToken.flatMap(UnverifiedToken.subject)
        let started = ContinuousClock.now
        var waited = false
        do {
            while true {
                let at = now.addingTimeInterval(Double((ContinuousClock.now - started) / .milliseconds(1)) / 1_000)
                let lifetime = RequestBudget.bound(Self.claimLifetime) + RequestBudget.reserve
                let claimUntil = at.addingTimeInterval(Double(lifetime / .milliseconds(1)) / 1_000)
                let claimed =
                    if let sealed {
                        try await database.webSignIns.claimSealedState(sealed, now: at, claimUntil: claimUntil, subject: subject)
                    } else {
                        try await database.webSignIns.claimState(
                            hash: stateHash, tenantID: stateTenant, now: at, claimUntil: claimUntil, subject: subject)
                    }
                if let found = claimed {
                    return .claimed(found)
                }
                guard
                    let repeated = try await database.webSignIns.repeatOf(
                        hash: stateHash, tenantID: stateTenant, now: at, codeHash: Self.hash(code)),
                    let provider = ProviderID(rawValue: repeated.provider), (provider == .apple) == (route == .apple)
                else { return .answered(.invalidState) }
                let back = { (answer: Answer) in
                    Claim.answered(
                        Self.sendBack(
                            to: repeated.returnURL, callerState: repeated.callerState, relyingParty: repeated.relyingParty, answer))
                }
                switch repeated.answer {
                case .code(let unexchanged):
                    // A code already exchanged is spent: the repeat is a replay.
                    return unexchanged ? back(.code(code)) : .answered(.invalidState)
                case .error(let error):
                    return back(.error(error))
                case .unclaimed:
                    continue
                case .inFlight:
                    if !waited {
                        waited = true
                        repeats.record()
                        context.logger.info("web sign-in callback: a repeat of a callback in flight waits for its answer")
                    }
                    guard RequestBudget.bound(Self.repeatPoll) == Self.repeatPoll else {
                        return back(.error("temporarily_unavailable"))
                    }
                    try await Task.sleep(for: Self.repeatPoll)
                }
            }
        } catch is CancellationError {
            return .answered(.unavailable)
        } catch {
            context.logger.warning(
                "web sign-in callback: the database did not answer", metadata: ["error": "\(String(describing: type(of: error)))"])
            return .answered(.unavailable)
        }
    }

    /// The `error` a failed callback sends the person back with, after logging (and auditing)
    /// what happened.
    private func callbackError(_ error: any Error, stored: WebSignInState, provider: ProviderID, context: OperationContext) -> String {
        let metadata: Logger.Metadata = ["provider": "\(provider)", "client_id": "\(stored.clientID)", "tenant_id": "\(stored.tenantID)"]
        switch error {
        case let failure as ProviderFailure:
            switch failure {
            case .rejected, .subjectMismatch, .malformedProof, .nonceRequired, .nonceMissing:
                context.logger.notice(
                    "web sign-in refused: the provider's answer did not verify",
                    metadata: metadata.merging(["code": "\(failure.code)"]) { $1 })
                return "invalid_token"
            case .unavailable, .unreadableAnswer:
                context.logger.warning(
                    "web sign-in: the provider did not answer usefully", metadata: metadata.merging(["code": "\(failure.code)"]) { $1 })
                return "provider_unavailable"
            case .codeExchangeRefused(let reason, _), .tokenRequestRefused(_, let reason):
                let fix = Self.fix(provider: provider, reason: reason)
                context.logger.error(
                    "web sign-in: the provider refused the code exchange",
                    metadata: metadata.merging(["reason": "\(reason)", "fix": "\(fix)"]) { $1 })
                events.webCodeRefused(
                    tenantID: stored.tenantID, provider: provider.rawValue, clientID: stored.clientID, reason: reason, fix: fix,
                    remoteAddress: context.remoteAddress)
                return "provider_refused"
            case .appleKeyMissing(let teamID):
                let fix =
                    "Team \(teamID) has no Sign in with Apple key: broker apple key set --tenant <slug> --team-id \(teamID) --key-id <KEY ID> --p8 <file>."
                context.logger.error(
                    "web sign-in: no Apple key to make a client secret", metadata: metadata.merging(["fix": "\(fix)"]) { $1 })
                events.webCodeRefused(
                    tenantID: stored.tenantID, provider: provider.rawValue, clientID: stored.clientID, reason: "apple_key_missing",
                    fix: fix,
                    remoteAddress: context.remoteAddress)
                return "provider_refused"
            case .notEnabled: return "provider_not_enabled"
            case .unknownClient: return "web_flow_not_supported"
            }
        case let failure as SignInFailure:
            switch failure {
            case .accountNotFound: return "account_not_found"
            case .accountDisabled: return "account_disabled"
            case .tokenReplayed: return "invalid_token"
            case .unknownProvider: return "provider_not_enabled"
            }
        case is TenantNotActive:
            return "tenant_not_active"
        case let failure as WebClientFailure:
            if case .notSupported = failure { return "web_flow_not_supported" }
            return "web_flow_not_supported"
        default:
            if error.isDatabaseUnavailable {
                context.logger.warning("web sign-in callback: the database did not answer", metadata: metadata)
                return "temporarily_unavailable"
            }
            context.logger.error(
                "web sign-in callback failed", metadata: metadata.merging(["error": "\(String(describing: type(of: error)))"]) { $1 })
            return "server_error"
        }
    }

    /// What the operator must fix when a provider refused the code exchange.
    static func fix(provider: ProviderID, reason: String) -> String {
        switch (provider == .apple, reason) {
        case (true, "invalid_client"):
            "Apple refused the client secret: check the team id and key id (broker apple team list), that the .p8 key is not revoked in the developer account, and that the Services ID is enabled for Sign in with Apple in that team."
        case (true, "invalid_grant"):
            "Apple refused the code: the redirect URI must be registered for the Services ID exactly as sent (broker apple client add --redirect-uri), and a code is single use and expires after 5 minutes."
        case (true, _):
            "Apple refused the code exchange (\(reason)); check the Services ID's configuration in the developer account."
        case (false, "invalid_client"), (false, "unauthorized_client"):
            "The token endpoint refused the client: check the client id and the secret (broker provider enable ... --client-secret-file)."
        case (false, "invalid_grant"):
            "The token endpoint refused the code: the redirect URI registered at the provider must equal the broker's (--redirect-uri), and a code is single use."
        default:
            "The token endpoint refused the code exchange (\(reason)); check the provider's client configuration."
        }
    }

    // MARK: Exchange

    /// Exchanges a broker code of this tenant and provider, once, for the session a native
    /// sign-in would open.
    package func exchange(tenant: Tenant, provider: ProviderID, code: String, context: OperationContext, now: Date = Date()) async throws
        -> SignInOutcome
    {
        try await TenantScope.tenant(tenant.id) {
            guard !code.isEmpty, code.utf8.count <= 128 else { throw WebSignInFailure.invalidGrant }
            guard
                let sealed = try await database.webSignIns.takeGrant(
                    codeHash: Self.hash(code), tenantID: tenant.id, provider: provider.rawValue, now: now)
            else { throw WebSignInFailure.invalidGrant }
            let grant = try open(sealed, tenant: tenant, provider: provider)
            return try await complete(grant, tenant: tenant, provider: provider, context: context, now: now)
        }
    }

    /// What a relying party's authorization code opened (decisions 0082, 0085): the session of
    /// the sign-in at the provider's callback, and the refresh token the code derives for it.
    package struct Redeemed: Sendable {
        package let accountID: UUID
        package let sessionID: UUID
        package let idp: String
        package let claims: ScopedClaims
        package let refreshToken: RefreshToken
        package let scopes: [OAuthScope]
        package let nonce: String?
        package let authTime: Date
    }

    /// Redeems a relying party's authorization code at the token endpoint (decisions 0082, 0085):
    /// once, for the client it was issued to, with the redirect URI it was asked with and the
    /// PKCE verifier of its challenge. The person signed in at the provider's callback; the code
    /// names the session that opened, which a refused redemption ends, and so does a second use
    /// of the code (RFC 6749 §4.1.2). Throws ``TokenEndpointError/invalidGrant(_:)`` for every
    /// refusal.
    package func redeem(
        code: String, client: OAuthClient, tenant: Tenant, redirectURI: String?, codeVerifier: String?, context: OperationContext,
        now: Date = Date()
    ) async throws -> Redeemed {
        try await TenantScope.tenant(tenant.id) {
            guard !code.isEmpty, code.utf8.count <= 128 else { throw TokenEndpointError.invalidGrant("The code is malformed.") }
            let sealed: Data
            let sessionID: UUID
            let account: WebSignInRepository.CodeAccount?
            switch try await database.webSignIns.redeem(codeHash: Self.hash(code), tenantID: tenant.id, clientID: client.clientID, now: now)
            {
            case .unknown, .redeemed(_, _, nil, _):
                // A code kept before codes named their session is refused like an unknown one:
                // it lived a minute, and the person signs in again.
                throw TokenEndpointError.invalidGrant("The code is unknown, expired, or another client's.")
            case .usedBefore(let sessionID):
                if let sessionID {
                    try await database.sessions.revoke(tenantID: tenant.id, sessionID: sessionID, reason: "authorization_code_reused")
                }
                context.logger.notice(
                    "authorization code used twice: the session it opened is ended", metadata: ["client_id": "\(client.clientID)"])
                throw TokenEndpointError.invalidGrant("The code was used before; the session it opened has been ended.")
            case .redeemed(let found, _, let named?, let owner):
                (sealed, sessionID, account) = (found, named, owner)
            }
            // Every check failed from here spends the code and ends its session.
            let refuse = { (reason: String) async throws -> TokenEndpointError in
                try await database.sessions.revoke(tenantID: tenant.id, sessionID: sessionID, reason: "authorization_code_refused")
                return .invalidGrant(reason)
            }
            let opened = try secrets.open(
                sealed, context: AuthorizationCodeGrant.sealingContext(tenantID: tenant.id), what: "authorization code")
            // The session's account is gone with its session: the code names nobody.
            guard let grant = AuthorizationCodeGrant(json: opened), grant.sessionID == sessionID,
                grant.relyingParty.clientID == client.clientID, let account
            else { throw try await refuse("The code is unknown, expired, or another client's.") }
            let party = grant.relyingParty
            // RFC 6749 §4.1.3: identical to the authorization request's.
            guard redirectURI == party.redirectURI else {
                throw try await refuse("redirect_uri differs from the authorization request's.")
            }
            switch (party.request.codeChallenge, codeVerifier) {
            case (nil, nil): break
            case (nil, _?): throw try await refuse("code_verifier was sent, but the authorization request had no code_challenge.")
            case (_?, nil): throw try await refuse("code_verifier is missing.")
            case (let challenge?, let verifier?):
                guard PKCE.verifies(verifier, challenge: challenge) else {
                    throw try await refuse("code_verifier does not match the code_challenge.")
                }
            }
            let claims = ScopedClaims(
                email: account.email, emailVerified: account.emailVerified, givenName: account.givenName,
                familyName: account.familyName, scopes: party.request.scopes)
            return Redeemed(
                accountID: account.id, sessionID: sessionID, idp: grant.idp, claims: claims,
                refreshToken: RefreshToken.derived(sessionID: sessionID, from: code, key: keys.refreshToken),
                scopes: party.request.scopes, nonce: party.request.nonce, authTime: party.authTime)
        }
    }

    /// A grant sealed under a code, opened for its tenant and provider.
    private func open(_ sealed: Data, tenant: Tenant, provider: ProviderID) throws -> WebSignInGrant {
        let opened = try secrets.open(
            sealed, context: WebSignInGrant.sealingContext(tenantID: tenant.id, provider: provider), what: "web sign-in")
        guard let grant = WebSignInGrant(json: opened), grant.verified != nil else { throw WebSignInFailure.invalidGrant }
        return grant
    }

    /// The sign-in a grant vouches for, completed as a native one.
    private func complete(
        _ grant: WebSignInGrant, tenant: Tenant, provider: ProviderID, context: OperationContext,
        now: Date
    ) async throws -> SignInOutcome {
        guard let verified = grant.verified else { throw WebSignInFailure.invalidGrant }
        let tenantID = tenant.id
        let revokeLater: (@Sendable (KeptProviderToken, String) -> Void)? =
            grant.kept == nil
            ? nil : { @Sendable [self] token, reason in giveBack(token, tenantID: tenantID, provider: provider, grant: grant, reason) }
        return try await signIn.complete(
            tenant: tenant, provider: provider, verified: verified, kept: grant.kept, revokeLater: revokeLater, intent: grant.signInIntent,
            platform: "web", context: context, now: now)
    }

    /// Gives a kept provider token back to the provider that issued it, in the background.
    private func giveBack(_ token: KeptProviderToken, tenantID: UUID, provider: ProviderID, grant: WebSignInGrant, _ reason: String) {
        let (store, providers, clientID) = (store, providers, grant.clientID)
        Task {
            await TenantScope.tenant(tenantID) {
                guard let registered = try? await store.registered(provider, tenantID: tenantID, in: providers),
                    let webClient = registered.entry.webClient,
                    let client = try? await webClient(clientID, provider, tenantID, store)
                else { return }
                client.revokeLater?(token, reason)
            }
        }
    }

    // MARK: Support

    /// The request of a state: its nonce and PKCE verifier are derived from it with keys of the
    /// master key, so neither is stored (decision 0038).
    package func request(for state: String) -> AuthorizationRequest {
        AuthorizationRequest(state: state, nonce: Self.derive(state, keys.nonce), codeVerifier: Self.derive(state, keys.pkce))
    }

    static func derive(_ state: String, _ key: SymmetricKey) -> String {
        Base64URL.encode(Data(HMAC<SHA256>.authenticationCode(for: Data(state.utf8), using: key)))
    }

    package static func hash(_ value: String) -> Data { Data(SHA256.hash(data: Data(value.utf8))) }

    /// How a callback ends: with the broker code, or with an error.
    enum Answer {
        case code(String)
        case error(String)
    }

    /// Where a callback sends the person's browser: the return URL with `code` or `error` and
    /// the caller's `state`; for a relying party's sign-in (decision 0082), its redirect URI with
    /// `code` or an RFC 6749 `error` with its `error_description`, its `state`, and `iss`
    /// (RFC 9207).
    static func sendBack(to returnURL: String, callerState: String?, relyingParty: KeptClientRequest?, _ answer: Answer)
        -> CallbackOutcome
    {
        var pairs: [(String, String)]
        switch (answer, relyingParty) {
        case (.code(let code), _): pairs = [("code", code)]
        case (.error(let error), nil): pairs = [("error", error)]
        case (.error(let error), _?):
            let shown = RelyingPartyErrors.authorizationError(forCallbackError: error)
            pairs = [("error", shown.error), ("error_description", shown.description)]
        }
        if let callerState { pairs.append(("state", callerState)) }
        if let relyingParty { pairs.append(("iss", relyingParty.issuer)) }
        return .redirect(Self.returnURL(returnURL, pairs))
    }

    /// The return URL with `pairs` added to its query.
    static func returnURL(_ base: String, _ pairs: [(String, String)]) -> String {
        let fragmentStart = base.firstIndex(of: "#")
        let head = fragmentStart.map { String(base[..<$0]) } ?? base
        let fragment = fragmentStart.map { String(base[$0...]) } ?? ""
        return head + (head.contains("?") ? "&" : "?") + FormEncoding.encode(pairs) + fragment
    }

    /// A provider's `error` as passed on: a short code of lowercase letters, digits and `_`.
    static func shownError(_ error: String) -> String {
        let allowed =
            error.utf8.count <= 64 && !error.isEmpty
            && error.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }
        return allowed ? error : "provider_error"
    }
}

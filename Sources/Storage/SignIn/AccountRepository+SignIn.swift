import BrokerCore
import Foundation
import Logging
import PostgresNIO

extension AccountRepository {
    /// Finds or creates the identity and its account and opens a session, in one statement
    /// (one round trip). Two concurrent first sign-ins of one subject yield one account: the
    /// loser of the unique-index race takes the ON CONFLICT path and returns the winner's
    /// account. Names are stored only where none is stored yet; an email from the token
    /// replaces the stored one; empty values never blank anything. Returns nil when the
    /// identity is unknown and the intent is `sign_in`, or the account is not active.
    ///
    /// An identity this process has signed in before first gets the lean
    /// ``QuietSignInBatchStatement``; when its conditions do not hold it opens nothing and the full
    /// statement follows. Any other identity, when the sign-in may create an account, first
    /// gets the lean ``FirstSignInBatchStatement`` (decision 0059): it opens the session of a
    /// quiet sign-in as the quiet statement would, creates the account when nothing but a new
    /// account could come of the sign-in, and otherwise writes nothing. A stored identity that
    /// was not quiet then gets the lean ``KnownSignInBatchStatement`` (decision 0063), a posted
    /// provider refresh token included (decision 0091); the full statement follows whatever
    /// did not apply.
    /// A deletion, an account-delete or consent-revoked notification or another sign-in of the
    /// account that aborts the statement (a deadlock, or a row it references gone) runs it again
    /// (``RaceRetry``): the next attempt sees what the other committed.
    public func signIn(_ request: SignInRequest) async throws -> SignInResult? {
        do {
            return try await RaceRetry.run("sign-in", logger: logger) { try await signInOnceOrQuietly(request) }
        } catch let error where error.postgresError?.violatedConstraint == "sessions_pkey" {
            // The session id is the identity token's replay key (decision 0018): this token
            // opened a session before, and the statement wrote nothing.
            throw IdentityTokenReplayed()
        }
    }

    private func signInOnceOrQuietly(_ request: SignInRequest) async throws -> SignInResult? {
        let key = RecentSignIns.Key(
            tenantID: request.tenantID, provider: request.provider, providerScope: request.providerScope,
            subject: request.subject)
        let recent = recentSignIns.contains(key)
        if request.sealedProviderRefreshToken == nil, recent, let result = try await signInQuietly(request) { return result }
        // Whether the identity is stored, as far as this process can tell.
        var stored = recent
        if !recent, request.intent != .signIn {
            switch try await signInFirst(request) {
            case .created(let result), .opened(let result):
                recentSignIns.record(key)
                return result
            case .known: stored = true
            case .elsewhere: break
            case .replayed: throw IdentityTokenReplayed()
            }
        }
        // A stored identity the sign-in brings something new for (decision 0063), such as the
        // provider refresh token an Apple code sign-in keeps (decision 0091).
        if stored, let result = try await signInKnown(request) {
            recentSignIns.record(key)
            return result
        }
        if let result = try await signInOnce(request) {
            recentSignIns.record(key)
            return result
        }
        guard request.intent != .signIn else { return nil }
        // Lost a first-sign-in race: the ON CONFLICT path found the winner's identity, but the
        // winner's account row was committed after this statement's snapshot was taken. A new
        // statement sees it (and opens the session then).
        return try await signInOnce(request)
    }

    private func signInOnce(_ request: SignInRequest) async throws -> SignInResult? {
        let rows = try await client.rows(
            SignInStatement(request: request, newIdentityID: .timeOrdered(), newAccountID: .timeOrdered()), logger: logger)
        var first: PostgresRow?
        for row in rows where first == nil { first = row }
        guard let row = first else { return nil }
        // The account's columns, the identity's, whether the identity was created, whether it
        // joined an existing account, and whether another account has its email.
        var reader = RowReader(row)
        let account = try Self.decodeAccount(&reader)
        let identity = try Self.decodeIdentity(&reader)
        let (inserted, linked, possibleDuplicate, renewed): (Bool, Bool, Bool, Bool) = (
            try reader.next(), try reader.next(), try reader.next(), try reader.next()
        )
        // `renewed`: the identity joined the account a consent revocation had unlinked it from
        // (a new Sign in with Apple after `consent-revoked`), not an account found by email.
        return SignInResult(
            account: account, identity: identity, isNewAccount: inserted && !linked, sessionID: request.session.id,
            linkedBy: linked && !renewed ? .verifiedEmail : nil, possibleDuplicate: possibleDuplicate && !renewed)
    }

    /// The lean statement of a stored identity's sign-in that brings something new, in a batch
    /// with the sign-ins that arrive with it or alone when batches are off (decision 0063); nil
    /// when it did not apply (it then wrote nothing).
    private func signInKnown(_ request: SignInRequest) async throws -> SignInResult? {
        if let knownSignIns { return try await knownSignIns.run(request).get() }
        return try await Self.knownSignIns([request], client: client, logger: logger)[0]
    }

    /// The lean first-sign-in statement: in a batch with the sign-ins that arrive with it
    /// (decision 0059), or alone when batches are off.
    private func signInFirst(_ request: SignInRequest) async throws -> FirstSignInOutcome {
        if let firstSignIns { return try await firstSignIns.run(request).get() }
        return try await Self.firstSignIns([request], client: client, logger: logger)[0]
    }

    /// The lean quiet statement: in a batch with the sign-ins that arrive with it (decision
    /// 0030), or alone when batches are off.
    private func signInQuietly(_ request: SignInRequest) async throws -> SignInResult? {
        let outcome =
            if let quietSignIns { try await quietSignIns.run(request).get() } else {
                try await Self.quietSignIns([request], client: client, logger: logger)[0]
            }
        switch outcome {
        case .opened(let result): return result
        case .notQuiet: return nil
        case .replayed: throw IdentityTokenReplayed()
        }
    }
}

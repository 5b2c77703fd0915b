import BrokerCore
import Foundation
import Logging
import PostgresNIO

/// The identity token of a sign-in opened a session of the tenant before (decision 0018).
public struct IdentityTokenReplayed: Error, Sendable {}

/// Accounts and their provider identities.
public struct AccountRepository: Sendable {
    let client: PostgresClient
    let logger: Logger
    let recentSignIns: RecentSignIns
    /// Quiet sign-ins of concurrent requests, written together (decision 0030); nil: one
    /// statement each.
    var quietSignIns: QuietSignIns? = nil
    /// First sign-ins of concurrent requests, written together (decision 0059); nil: one
    /// statement each.
    var firstSignIns: FirstSignIns? = nil
    /// Stored identities' sign-ins that bring something new, written together (decision 0063);
    /// nil: one statement each.
    var knownSignIns: KnownSignIns? = nil

    static let accountColumns = "\(accountColumnsBeforeStamp), a.last_seen_at"
    static let identityColumns = "\(identityColumnsBeforeStamp), i.last_sign_in_at"
    /// The columns a sign-in returns when it writes no account or identity row (the quiet
    /// path): the stamps are this sign-in's, whose session records it (decision 0013).
    static let quietAccountColumns = "\(accountColumnsBeforeStamp), now() AS last_seen_at"
    static let quietIdentityColumns = "\(identityColumnsBeforeStamp), now() AS last_sign_in_at"
    private static let accountColumnsBeforeStamp =
        "a.id, a.tenant_id, a.given_name, a.family_name, a.email, a.email_verified, a.is_private_email, a.status, a.created_at, a.external_id"
    private static let identityColumnsBeforeStamp = """
        i.id, i.account_id, i.provider, i.provider_scope, i.subject, i.email, i.email_verified, i.is_private_email,
        i.relay_email_deliverable, i.given_name, i.family_name, i.real_user_status,
        (i.provider_refresh_token_sealed IS NOT NULL), i.created_at, i.attributes::text
        """

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
    /// was not quiet then gets the lean ``KnownSignInBatchStatement`` (decision 0063) unless a
    /// provider refresh token is posted; the full statement follows whatever did not apply.
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
        // A stored identity the sign-in brings something new for (decision 0063).
        if stored, request.sealedProviderRefreshToken == nil, let result = try await signInKnown(request) {
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

    /// What a sign-in writes on its stored identity `i` from what it brings (`EXCLUDED`): an
    /// email replaces the stored one (with its flags), names fill only what is empty, empty
    /// values never blank anything, attributes are merged.
    static let identityUpdate = """
        email = coalesce(EXCLUDED.email, i.email),
        email_verified = CASE WHEN EXCLUDED.email IS NULL THEN i.email_verified ELSE EXCLUDED.email_verified END,
        is_private_email = CASE WHEN EXCLUDED.email IS NULL THEN i.is_private_email ELSE EXCLUDED.is_private_email END,
        given_name = coalesce(i.given_name, EXCLUDED.given_name),
        family_name = coalesce(i.family_name, EXCLUDED.family_name),
        real_user_status = coalesce(EXCLUDED.real_user_status, i.real_user_status),
        provider_refresh_token_sealed = coalesce(EXCLUDED.provider_refresh_token_sealed, i.provider_refresh_token_sealed),
        provider_token_client_id = CASE WHEN EXCLUDED.provider_refresh_token_sealed IS NULL THEN i.provider_token_client_id
            ELSE EXCLUDED.provider_token_client_id END,
        attributes = CASE WHEN EXCLUDED.attributes IS NULL THEN i.attributes
            ELSE coalesce(i.attributes, '{}'::jsonb) || EXCLUDED.attributes END,
        last_sign_in_at = now(), updated_at = now()
        """

    /// What a sign-in writes on the account `a` of its updated identity `u`: the identity's
    /// email, names and display name where the account has none, active, seen now.
    static let accountUpdate = """
        email = coalesce(u.email, a.email),
        email_verified = CASE WHEN u.email IS NULL THEN a.email_verified ELSE u.email_verified END,
        is_private_email = CASE WHEN u.email IS NULL THEN a.is_private_email ELSE u.is_private_email END,
        given_name = coalesce(a.given_name, u.given_name),
        family_name = coalesce(a.family_name, u.family_name),
        display_name = coalesce(a.display_name, nullif(trim(concat_ws(' ', u.given_name, u.family_name)), '')),
        status = 'active', disabled_reason = NULL, last_seen_at = now(), updated_at = now()
        """

    /// The sign-in statement, prepared once per connection (decision 0014 on its plan: every
    /// account row is reached through (tenant_id, id) with both bound, the joined `account_id`
    /// repeated as a scalar subquery so that the generic plan cannot scan a tenant's accounts): parsing and planning it cost more
    /// than running it (measured 1.7 ms vs 0.65 ms). A returning sign-in that changes nothing
    /// on the identity writes no identity or account row (the `quiet` path): it only opens the
    /// session, and the session is the record of the sign-in (`last_sign_in_at` and
    /// `last_seen_at` are read from the sessions; decision 0013).
    struct SignInStatement: PostgresPreparedStatement {
        typealias Row = PostgresRow

        static let name = "ib_sign_in"

        let request: SignInRequest
        let newIdentityID: UUID
        let newAccountID: UUID

        static let sql = """
            WITH stored AS (
                SELECT \(quietIdentityColumns)
                FROM identities i
                WHERE i.tenant_id = $2::uuid AND i.provider = $4::text AND i.provider_scope = $5::text AND i.subject = $6::text
            ),
            quiet AS (
                SELECT s.* FROM stored s
                WHERE ($7::text IS NULL OR (s.email = $7::text AND s.email_verified = $8::bool AND s.is_private_email = $9::bool))
                    AND ($10::text IS NULL OR s.given_name IS NOT NULL)
                    AND ($11::text IS NULL OR s.family_name IS NOT NULL)
                    AND ($12::int8 IS NULL OR s.real_user_status = $12::int8)
                    AND $13::bytea IS NULL
                    AND ($21::text::jsonb IS NULL OR s.attributes::jsonb @> $21::text::jsonb)
            ),
            renewed AS (
                SELECT c.account_id,
                    (a.status = 'active' OR (a.status = 'disabled' AND a.disabled_reason IS NOT DISTINCT FROM 'consent_revoked'))
                        AS relinkable
                FROM consent_revocations c JOIN accounts a ON a.tenant_id = c.tenant_id AND a.id = c.account_id
                WHERE NOT EXISTS (SELECT 1 FROM stored)
                    AND c.tenant_id = $2::uuid AND c.provider = $4::text AND c.provider_scope = $5::text AND c.subject = $6::text
            ),
            forgotten AS (
                DELETE FROM consent_revocations c
                WHERE EXISTS (SELECT 1 FROM renewed WHERE relinkable)
                    AND c.tenant_id = $2::uuid AND c.provider = $4::text AND c.provider_scope = $5::text AND c.subject = $6::text
            ),
            upserted AS (
                INSERT INTO identities AS i (id, tenant_id, account_id, provider, provider_scope, subject, email,
                    email_verified, is_private_email, given_name, family_name, real_user_status,
                    provider_refresh_token_sealed, provider_token_client_id, attributes, last_sign_in_at)
                SELECT $1::uuid, $2::uuid,
                    coalesce((SELECT account_id FROM renewed), CASE WHEN $22::bool AND NOT EXISTS (SELECT 1 FROM stored) THEN coalesce((
                        SELECT (array_agg(m.id))[1] FROM (
                            SELECT m.id FROM accounts m
                            WHERE m.tenant_id = $2::uuid AND m.email_key = lower($7::text) AND m.email IS NOT NULL
                                AND m.email_verified AND NOT m.is_private_email AND m.status = 'active'
                            LIMIT 2) m
                        HAVING count(*) = 1), $3::uuid)
                    ELSE $3::uuid END),
                    $4::text, $5::text, $6::text, $7::text, $8::bool, $9::bool,
                    $10::text, $11::text, $12::int8, $13::bytea, CASE WHEN $13::bytea IS NULL THEN NULL ELSE $16::text END,
                    $21::text::jsonb, now()
                WHERE NOT EXISTS (SELECT 1 FROM quiet) AND ($14::bool OR EXISTS (SELECT 1 FROM stored) OR EXISTS (SELECT 1 FROM renewed))
                    AND NOT EXISTS (SELECT 1 FROM renewed WHERE NOT relinkable)
                ON CONFLICT (tenant_id, provider, provider_scope, subject) DO UPDATE SET
                    \(identityUpdate)
                RETURNING \(identityColumns), (i.xmax = 0) AS inserted
            ),
            identity AS (SELECT * FROM upserted UNION ALL SELECT q.*, false FROM quiet q),
            created AS (
                INSERT INTO accounts AS a (id, tenant_id, given_name, family_name, display_name, email, email_verified,
                    is_private_email, last_seen_at)
                SELECT u.account_id, $2::uuid, u.given_name, u.family_name,
                    nullif(trim(concat_ws(' ', u.given_name, u.family_name)), ''), u.email, u.email_verified,
                    u.is_private_email, now()
                FROM upserted u WHERE u.inserted AND u.account_id = $3::uuid
                RETURNING \(accountColumns)
            ),
            updated AS (
                UPDATE accounts a SET
                    \(accountUpdate)
                FROM upserted u
                WHERE (NOT u.inserted OR u.account_id <> $3::uuid) AND a.tenant_id = $2::uuid AND a.id = u.account_id
                    AND (a.status = 'active'
                        OR (a.status = 'disabled' AND a.disabled_reason = 'consent_revoked' AND EXISTS (SELECT 1 FROM renewed)))
                    AND a.id = (SELECT account_id FROM upserted WHERE NOT inserted OR account_id <> $3::uuid)
                RETURNING \(accountColumns)
            ),
            kept AS (
                SELECT \(quietAccountColumns) FROM accounts a, quiet q
                WHERE a.tenant_id = $2::uuid AND a.id = q.account_id AND a.status = 'active'
                    AND a.id = (SELECT account_id FROM quiet)
            ),
            account AS (SELECT * FROM created UNION ALL SELECT * FROM updated UNION ALL SELECT * FROM kept),
            opened AS (
                INSERT INTO sessions (id, tenant_id, account_id, identity_id, client_id, platform, idp, expires_at,
                    refresh_token_hash, refresh_token_expires_at)
                SELECT $15::uuid, $2::uuid, account.id, u.id, $16::text, $17::text, $4::text, $18::timestamptz,
                    $19::bytea, $20::timestamptz
                FROM account, identity u
            ),
            capped AS (
                UPDATE sessions s SET revoked_at = now(), revoke_reason = 'session_limit'
                WHERE EXISTS (
                        SELECT 1 FROM account
                        WHERE EXISTS (SELECT 1 FROM sessions c WHERE c.account_id = account.id OFFSET $23::int - 1 LIMIT 1))
                    AND s.tenant_id = $2::uuid AND s.revoked_at IS NULL AND s.id = ANY(ARRAY(
                    SELECT x.id FROM account CROSS JOIN LATERAL (
                        SELECT o.id FROM sessions o
                        WHERE o.tenant_id = $2::uuid AND o.account_id = account.id AND o.revoked_at IS NULL AND o.expires_at > now()
                        ORDER BY o.created_at DESC, o.id DESC OFFSET $23::int - 1) x))
            ),
            linked AS (
                INSERT INTO audit_log (tenant_id, actor, action, target, details)
                SELECT $2::uuid, 'user', 'identity.linked', u.id::text,
                    jsonb_build_object('account_id', u.account_id, 'identity_id', u.id, 'provider', u.provider,
                        'linked_by', 'verified_email')
                FROM upserted u, account WHERE u.inserted AND u.account_id <> $3::uuid AND NOT EXISTS (SELECT 1 FROM renewed)
            ),
            relinked AS (
                INSERT INTO audit_log (tenant_id, actor, action, target, details)
                SELECT $2::uuid, 'user', 'identity.relinked', u.id::text,
                    jsonb_build_object('account_id', u.account_id, 'identity_id', u.id, 'provider', u.provider,
                        'linked_by', 'consent_renewed')
                FROM upserted u, account, renewed WHERE u.inserted
            ),
            announced AS (
                INSERT INTO events_outbox (tenant_id, account_id, event_type, payload)
                SELECT $2::uuid, u.account_id,
                    CASE WHEN u.account_id = $3::uuid THEN 'account.created' ELSE 'identity.linked' END,
                    jsonb_build_object('account_id', u.account_id, 'identity_id', u.id, 'provider', u.provider)
                        || CASE WHEN u.account_id = $3::uuid THEN '{}'::jsonb
                            ELSE jsonb_build_object('linked_by',
                                CASE WHEN EXISTS (SELECT 1 FROM renewed) THEN 'consent_renewed' ELSE 'verified_email' END) END
                FROM upserted u, account WHERE u.inserted
            )
            SELECT account.*, u.*, (u.inserted AND u.account_id <> $3::uuid) AS linked,
                (u.inserted AND u.account_id = $3::uuid AND $7::text IS NOT NULL AND EXISTS (
                    SELECT 1 FROM accounts d
                    WHERE d.tenant_id = $2::uuid AND d.email_key = lower($7::text) AND d.email IS NOT NULL
                        AND d.status <> 'deleted')) AS possible_duplicate,
                EXISTS (SELECT 1 FROM renewed) AS renewed
            FROM account, identity u
            """

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 23)
            bindings.append(newIdentityID)
            bindings.append(request.tenantID)
            bindings.append(newAccountID)
            bindings.append(request.provider)
            bindings.append(request.providerScope)
            bindings.append(request.subject)
            bindings.appendPostedIdentity(of: request)  // $7 … $12
            try bindings.append(request.sealedProviderRefreshToken)
            bindings.append(request.intent != .signIn)
            try bindings.appendNewSession(of: request)  // $15 … $20
            bindings.appendAttributes(of: request)  // $21
            bindings.append(request.autoLinkByEmail)
            bindings.append(request.maxOpenSessions)  // $23
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
    }

    /// The statement of `find` (its plan is asserted by HotStatementPlanTests, decision 0014).
    static func findQuery(tenantID: UUID, accountID: UUID) -> PostgresQuery {
        """
            SELECT \(unescaped: Self.accountColumns), \(unescaped: Self.identityColumnsBeforeStamp),
                greatest(i.last_sign_in_at, (SELECT max(s.created_at) FROM sessions s
                    WHERE s.tenant_id = i.tenant_id AND s.account_id = i.account_id AND s.identity_id = i.id))
            FROM accounts a LEFT JOIN identities i ON i.account_id = a.id
            WHERE a.tenant_id = \(tenantID) AND a.id = \(accountID)
            ORDER BY i.created_at
            """
    }

    /// The account with its identities; nil when the tenant has no such account. The account
    /// row is the tenant check: an identity's composite foreign key (tenant_id, account_id) puts
    /// it in its account's tenant, and keying identities by account alone leaves the planner no
    /// tenant-wide path (decision 0014). Quiet sign-ins
    /// write only their session, so each identity's `last_sign_in_at` is its latest session's
    /// start when that is later than the stored stamp, and the account's `last_seen_at` the
    /// latest of its own stamp and its identities' (decision 0013).
    public func find(tenantID: UUID, accountID: UUID) async throws -> (Account, [Identity])? {
        let rows = try await client.rows(Self.findQuery(tenantID: tenantID, accountID: accountID), logger: logger)
        var account: Account?
        var identities: [Identity] = []
        for row in rows {
            var reader = RowReader(row)
            let decoded = try Self.decodeAccount(&reader)
            account = account ?? decoded
            var probe = reader
            if try probe.next(UUID?.self) != nil { identities.append(try Self.decodeIdentity(&reader)) }
        }
        guard var account else { return nil }
        let lastSignIn = identities.compactMap(\.lastSignInAt).max()
        account.lastSeenAt = [account.lastSeenAt, lastSignIn].compactMap { $0 }.max()
        return (account, identities)
    }

    /// The tenant's account with this external id (issue 24), whatever its status.
    public func accountID(tenantID: UUID, externalID: String) async throws -> UUID? {
        try await client.rows(
            "SELECT id FROM accounts WHERE tenant_id = \(tenantID) AND external_id = \(externalID)", logger: logger
        ).first?.decode(UUID.self)
    }

    /// The status of the account an identity belongs to; nil when the tenant has no such
    /// identity. Asked before anything irreversible happens at the provider (redeeming an
    /// authorization code) so that a sign-in which will not open a session changes nothing.
    public func accountStatus(tenantID: UUID, provider: String, providerScope: String, subject: String) async throws
        -> AccountStatus?
    {
        let statement = AccountStatusStatement(tenantID: tenantID, provider: provider, providerScope: providerScope, subject: subject)
        return try await client.rows(statement, logger: logger).first
    }

    /// The status of the account an identity belongs to, prepared once per connection: a web
    /// callback asks it before Apple's code is redeemed. Identity by its unique key, account by
    /// (tenant_id, id) with both bound (decision 0014).
    struct AccountStatusStatement: PostgresPreparedStatement {
        typealias Row = AccountStatus

        static let name = "ib_account_status"
        /// An identity unlinked by a consent revocation (no identity row) answers for the account
        /// its next sign-in links to again: `active` when the revocation disabled it.
        static let sql = """
            SELECT a.status FROM accounts a
            WHERE a.tenant_id = $1::uuid AND a.id = (
                SELECT i.account_id FROM identities i
                WHERE i.tenant_id = $1::uuid AND i.provider = $2::text AND i.provider_scope = $3::text AND i.subject = $4::text)
            UNION ALL
            SELECT CASE WHEN a.status = 'disabled' AND a.disabled_reason = 'consent_revoked' THEN 'active' ELSE a.status END
            FROM consent_revocations c JOIN accounts a ON a.tenant_id = c.tenant_id AND a.id = c.account_id
            WHERE c.tenant_id = $1::uuid AND c.provider = $2::text AND c.provider_scope = $3::text AND c.subject = $4::text
                AND NOT EXISTS (
                    SELECT 1 FROM identities i
                    WHERE i.tenant_id = $1::uuid AND i.provider = $2::text AND i.provider_scope = $3::text AND i.subject = $4::text)
            """

        let tenantID: UUID
        let provider: String
        let providerScope: String
        let subject: String

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 4)
            bindings.append(tenantID)
            bindings.append(provider)
            bindings.append(providerScope)
            bindings.append(subject)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> AccountStatus { AccountStatus(rawValue: try row.decode(String.self)) ?? .disabled }
    }

    static func decodeAccount(_ reader: inout RowReader) throws -> Account {
        var account = Account(
            id: try reader.next(), tenantID: try reader.next(),
            name: PersonName(givenName: try reader.next(), familyName: try reader.next()), email: try reader.next(),
            emailVerified: try reader.next(), isPrivateEmail: try reader.next(),
            status: AccountStatus(rawValue: try reader.next(String.self)) ?? .disabled, createdAt: try reader.next(), lastSeenAt: nil)
        account.externalID = try reader.next()
        account.lastSeenAt = try reader.next()
        return account
    }

    static func decodeIdentity(_ reader: inout RowReader) throws -> Identity {
        let (id, accountID, provider, providerScope, subject): (UUID, UUID, String, String, String) =
            (try reader.next(), try reader.next(), try reader.next(), try reader.next(), try reader.next())
        let (email, emailVerified, isPrivateEmail, relayEmailDeliverable): (String?, Bool, Bool, Bool) =
            (try reader.next(), try reader.next(), try reader.next(), try reader.next())
        let name = PersonName(givenName: try reader.next(), familyName: try reader.next())
        let realUserStatus = try reader.next(Int16?.self).map(Int.init)
        let (hasProviderRefreshToken, createdAt, attributes): (Bool, Date, String?) =
            (try reader.next(), try reader.next(), try reader.next())
        return Identity(
            id: id, accountID: accountID, provider: provider, providerScope: providerScope, subject: subject, email: email,
            emailVerified: emailVerified, isPrivateEmail: isPrivateEmail, relayEmailDeliverable: relayEmailDeliverable,
            name: name, realUserStatus: realUserStatus, hasProviderRefreshToken: hasProviderRefreshToken, createdAt: createdAt,
            lastSignInAt: try reader.next(), attributes: IdentityAttributes.decode(attributes))
    }

}

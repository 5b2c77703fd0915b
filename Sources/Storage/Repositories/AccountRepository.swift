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

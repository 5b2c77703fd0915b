import BrokerCore
import Foundation
import PostgresNIO

/// The authorization codes of the tenants' OpenID Providers (decisions 0082, 0085): the broker
/// codes of web sign-ins a relying party asked for, each naming the session the person's sign-in
/// opened at the provider's callback, redeemed once by that client at the token endpoint. A
/// redeemed code keeps no grant, only its session, so that a second use ends that session
/// (RFC 6749 §4.1.2).
extension WebSignInRepository {
    /// How long a redeemed code is kept past its expiry for a second use to be recognised.
    static let redeemedCodeKept: TimeInterval = 3_600

    public enum Redemption: Sendable, Equatable {
        /// The code was this client's, unexpired and unredeemed: its sealed grant, now spent, the
        /// session it names (nil for a code kept before codes named their session) and that
        /// session's account as it is now (nil when the session is gone).
        case redeemed(sealed: Data, provider: String, sessionID: UUID?, account: CodeAccount?)
        /// The code was redeemed before: the session it names.
        case usedBefore(sessionID: UUID?)
        /// No such code of this client, or expired.
        case unknown
    }

    /// The account of a code's session, as the code's ID token shows it (decision 0100): read
    /// when the code is redeemed, not kept in its grant.
    public struct CodeAccount: Sendable, Equatable {
        public var id: UUID
        public var email: String?
        public var emailVerified: Bool
        public var givenName: String?
        public var familyName: String?
    }

    /// Redeems the code with this hash for `clientID`, once: one statement on an unlogged table,
    /// so its commit waits for no disk. A code of another client or tenant is left alone.
    public func redeem(codeHash: Data, tenantID: UUID, clientID: String, now: Date) async throws -> Redemption {
        let statement = RedeemCodeStatement(codeHash: codeHash, tenantID: tenantID, clientID: clientID, now: now)
        if let (sealed, provider, sessionID, account) = try await client.rows(statement, logger: logger).first {
            return .redeemed(sealed: sealed, provider: provider, sessionID: sessionID, account: account)
        }
        let used = try await client.rows(
            """
            UPDATE web_sign_in_codes SET reused_at = coalesce(reused_at, \(now))
            WHERE code_hash = \(codeHash) AND tenant_id = \(tenantID) AND oauth_client_id = \(clientID) AND redeemed_at IS NOT NULL
            RETURNING session_id
            """, logger: logger)
        guard let row = used.first else { return .unknown }
        var reader = RowReader(row)
        return .usedBefore(sessionID: try reader.next())
    }

    /// A code's redemption, the one statement of a code exchange: prepared once per connection,
    /// so that PostgreSQL only binds and runs it. The grant is read before the update empties it
    /// (PostgreSQL 15 has no `RETURNING old`): a concurrent redemption waits on the row lock and
    /// then finds it redeemed. The updated row is named by the code's hash itself, not only
    /// through the join: a plan made on empty tables read the table whole to join it
    /// (`HotStatementPlanTests`, decision 0014). The session's account is read with it, by
    /// its keys (decision 0100).
    struct RedeemCodeStatement: PostgresPreparedStatement {
        typealias Row = (sealed: Data, provider: String, sessionID: UUID?, account: CodeAccount?)

        static let name = "ib_redeem_authorization_code"
        static let sql = """
            UPDATE web_sign_in_codes c SET redeemed_at = $4::timestamptz, grant_sealed = '\\x'::bytea
            FROM (SELECT code_hash, grant_sealed, session_id FROM web_sign_in_codes
                WHERE code_hash = $1::bytea AND tenant_id = $2::uuid AND oauth_client_id = $3::text FOR UPDATE) o
            LEFT JOIN LATERAL (SELECT s.account_id FROM sessions s WHERE s.tenant_id = $2::uuid AND s.id = o.session_id LIMIT 1) s ON true
            LEFT JOIN LATERAL (
                SELECT a.id, a.email, a.email_verified, a.given_name, a.family_name
                FROM accounts a WHERE a.tenant_id = $2::uuid AND a.id = s.account_id LIMIT 1) a ON true
            WHERE c.code_hash = $1::bytea AND c.code_hash = o.code_hash AND c.tenant_id = $2::uuid AND c.redeemed_at IS NULL
                AND c.expires_at > $4::timestamptz
            RETURNING o.grant_sealed, c.provider, c.session_id, a.id, a.email, a.email_verified, a.given_name, a.family_name
            """

        let codeHash: Data
        let tenantID: UUID
        let clientID: String
        let now: Date

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 4)
            try bindings.append(codeHash)
            bindings.append(tenantID)
            bindings.append(clientID)
            bindings.append(now)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Row {
            var reader = RowReader(row)
            let (sealed, provider, sessionID): (Data, String, UUID?) = (try reader.next(), try reader.next(), try reader.next())
            let (id, email, emailVerified, givenName, familyName): (UUID?, String?, Bool?, String?, String?) = (
                try reader.next(), try reader.next(), try reader.next(), try reader.next(), try reader.next()
            )
            let account = id.map {
                CodeAccount(id: $0, email: email, emailVerified: emailVerified ?? false, givenName: givenName, familyName: familyName)
            }
            return (sealed, provider, sessionID, account)
        }
    }
}

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
        /// The code was this client's, unexpired and unredeemed: its sealed grant, now spent, and
        /// the session it names (nil for a code kept before codes named their session).
        case redeemed(sealed: Data, provider: String, sessionID: UUID?)
        /// The code was redeemed before: the session it names.
        case usedBefore(sessionID: UUID?)
        /// No such code of this client, or expired.
        case unknown
    }

    /// Redeems the code with this hash for `clientID`, once: one statement on an unlogged table,
    /// so its commit waits for no disk. A code of another client or tenant is left alone.
    public func redeem(codeHash: Data, tenantID: UUID, clientID: String, now: Date) async throws -> Redemption {
        let statement = RedeemCodeStatement(codeHash: codeHash, tenantID: tenantID, clientID: clientID, now: now)
        if let (sealed, provider, sessionID) = try await client.rows(statement, logger: logger).first {
            return .redeemed(sealed: sealed, provider: provider, sessionID: sessionID)
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
    /// (`HotStatementPlanTests`, decision 0014).
    struct RedeemCodeStatement: PostgresPreparedStatement {
        typealias Row = (sealed: Data, provider: String, sessionID: UUID?)

        static let name = "ib_redeem_authorization_code"
        static let sql = """
            UPDATE web_sign_in_codes c SET redeemed_at = $4::timestamptz, grant_sealed = '\\x'::bytea
            FROM (SELECT code_hash, grant_sealed FROM web_sign_in_codes
                WHERE code_hash = $1::bytea AND tenant_id = $2::uuid AND oauth_client_id = $3::text FOR UPDATE) o
            WHERE c.code_hash = $1::bytea AND c.code_hash = o.code_hash AND c.tenant_id = $2::uuid AND c.redeemed_at IS NULL
                AND c.expires_at > $4::timestamptz
            RETURNING o.grant_sealed, c.provider, c.session_id
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
            return (try reader.next(), try reader.next(), try reader.next())
        }
    }
}

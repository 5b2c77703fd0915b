import BrokerCore
import Foundation
import PostgresNIO

extension AccountRepository {
    /// The returning sign-in that brings nothing new, as one lean statement: the identity and
    /// its active account when nothing posted differs from what is stored, then the session
    /// with its first refresh token. Exactly the `quiet` path of ``SignInStatement``, without
    /// initializing that statement's insert, upsert and update plans (measured with pgbench:
    /// 8,700–9,200 vs 6,100–6,400 statements/s). Returns no row, and writes nothing, when any
    /// condition fails; the caller then runs ``SignInStatement``. A posted provider refresh
    /// token is never quiet: the caller does not try this statement then. The stamps it
    /// returns are this sign-in's (decision 0013).
    struct QuietSignInStatement: PostgresPreparedStatement {
        typealias Row = PostgresRow

        static let name = "ib_quiet_sign_in"

        let request: SignInRequest

        /// The identity first (its unique key), then its account by (tenant_id, id) with the id
        /// from the identity as a scalar subquery: no generic plan can scan a tenant (decision 0014).
        static let sql = """
            WITH found AS MATERIALIZED (
                SELECT \(quietIdentityColumns)
                FROM identities i
                WHERE i.tenant_id = $1::uuid AND i.provider = $2::text AND i.provider_scope = $3::text AND i.subject = $4::text
                    AND ($5::text IS NULL OR (i.email = $5::text AND i.email_verified = $6::bool AND i.is_private_email = $7::bool))
                    AND ($8::text IS NULL OR i.given_name IS NOT NULL)
                    AND ($9::text IS NULL OR i.family_name IS NOT NULL)
                    AND ($10::int8 IS NULL OR i.real_user_status = $10::int8)
                    AND ($17::text::jsonb IS NULL OR i.attributes @> $17::text::jsonb)
            ),
            quiet AS (
                SELECT \(quietAccountColumns), i.*, false AS inserted, a.id AS quiet_account_id, i.id AS quiet_identity_id
                FROM found i, accounts a
                WHERE a.tenant_id = $1::uuid AND a.id = (SELECT f.account_id FROM found f) AND a.status = 'active'
            ),
            opened AS (
                INSERT INTO sessions (id, tenant_id, account_id, identity_id, client_id, platform, idp, expires_at,
                    refresh_token_hash, refresh_token_expires_at)
                SELECT $11::uuid, $1::uuid, q.quiet_account_id, q.quiet_identity_id, $12::text, $13::text, $2::text,
                    $14::timestamptz, $15::bytea, $16::timestamptz
                FROM quiet q
            )
            SELECT * FROM quiet
            """

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 17)
            bindings.append(request.tenantID)
            bindings.append(request.provider)
            bindings.append(request.providerScope)
            bindings.append(request.subject)
            bindings.appendPostedIdentity(of: request)  // $5 … $10
            try bindings.appendNewSession(of: request)  // $11 … $16
            bindings.appendAttributes(of: request)  // $17
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
    }
}

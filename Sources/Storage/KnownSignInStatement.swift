import BrokerCore
import Foundation
import PostgresNIO

extension AccountRepository {
    /// A sign-in of a stored identity that brings something new for it, when this process has
    /// not signed that identity in before: the first sign-in after an import (the token brings
    /// Apple's `real_user_status` or attributes an import cannot know), or after a person
    /// changed an email at the provider. ``FirstSignInBatchStatement`` answers `known` for it.
    ///
    /// It writes what ``SignInStatement`` writes on that path and nothing else: the identity
    /// updated from the token (``identityUpdate``), its account updated from the identity
    /// (``accountUpdate``), the session with its first refresh token, and the session cap
    /// (``sessionCapCTE(tenant:cap:)``), all three shared with that statement as text. Its
    /// plan has four table modifications where the full statement has nine (decision 0063).
    ///
    /// It applies only when the identity is stored and its account active, and never with a
    /// provider refresh token (the caller sends those to the full statement). Otherwise it
    /// writes nothing and returns no row, and the caller runs the full statement, which
    /// decides as before. A taken session id fails it as it fails the full statement (a
    /// replayed identity token, nothing written).
    struct KnownSignInStatement: PostgresPreparedStatement {
        typealias Row = PostgresRow

        static let name = "ib_known_sign_in"

        let request: SignInRequest

        static let sql = """
            WITH stored AS (
                SELECT i.account_id
                FROM identities i
                WHERE i.tenant_id = $1::uuid AND i.provider = $2::text AND i.provider_scope = $3::text AND i.subject = $4::text
            ),
            upserted AS (
                UPDATE identities i SET
                    \(identityUpdate)
                FROM (
                    SELECT $5::text AS email, $6::bool AS email_verified, $7::bool AS is_private_email, $8::text AS given_name,
                        $9::text AS family_name, $10::int8 AS real_user_status, NULL::bytea AS provider_refresh_token_sealed,
                        NULL::text AS provider_token_client_id, $17::text::jsonb AS attributes
                ) AS excluded
                WHERE i.tenant_id = $1::uuid AND i.provider = $2::text AND i.provider_scope = $3::text AND i.subject = $4::text
                    AND EXISTS (
                        SELECT 1 FROM accounts s
                        WHERE s.tenant_id = $1::uuid AND s.id = (SELECT account_id FROM stored) AND s.status = 'active')
                RETURNING \(identityColumns)
            ),
            account AS (
                UPDATE accounts a SET
                    \(accountUpdate)
                FROM upserted u
                WHERE a.tenant_id = $1::uuid AND a.id = (SELECT account_id FROM upserted) AND a.status = 'active'
                RETURNING \(accountColumns)
            ),
            opened AS (
                INSERT INTO sessions (id, tenant_id, account_id, identity_id, client_id, platform, idp, expires_at,
                    refresh_token_hash, refresh_token_expires_at)
                SELECT $11::uuid, $1::uuid, account.id, u.id, $12::text, $13::text, $2::text, $14::timestamptz,
                    $15::bytea, $16::timestamptz
                FROM account, upserted u
            ),
            \(sessionCapCTE(tenant: "$1", cap: "$18"))
            SELECT account.*, u.* FROM account, upserted u
            """

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 18)
            bindings.append(request.tenantID)
            bindings.append(request.provider)
            bindings.append(request.providerScope)
            bindings.append(request.subject)
            bindings.appendPostedIdentity(of: request)  // $5 … $10
            try bindings.appendNewSession(of: request)  // $11 … $16
            bindings.appendAttributes(of: request)  // $17
            bindings.append(request.maxOpenSessions)  // $18
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
    }
}

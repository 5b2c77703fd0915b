import BrokerCore
import Foundation
import PostgresNIO

/// The two statements of every web callback, prepared once per connection (decision 0038): the
/// state read by its hash, and the state taken in the statement that keeps the sign-in under its
/// broker code.
extension WebSignInRepository {
    struct FindStateStatement: PostgresPreparedStatement {
        typealias Row = WebSignInState

        static let name = "ib_web_find_state"
        static let sql = """
            SELECT tenant_id, provider, client_id, redirect_uri, return_url, intent, caller_state, expires_at
            FROM web_sign_in_states WHERE state_hash = $1::bytea AND expires_at > $2::timestamptz
            """

        let hash: Data
        let now: Date

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 2)
            try bindings.append(hash)
            bindings.append(now)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> WebSignInState {
            let (tenantID, provider, clientID, redirectURI, returnURL, intent, callerState, expiresAt) =
                try row.decode((UUID, String, String, String, String, String, String?, Date).self)
            return WebSignInState(
                stateHash: hash, tenantID: tenantID, provider: provider, clientID: clientID, redirectURI: redirectURI, returnURL: returnURL,
                intent: SignInIntent(rawValue: intent) ?? .signIn, callerState: callerState, expiresAt: expiresAt)
        }
    }

    struct TakeStateStatement: PostgresPreparedStatement {
        typealias Row = Int32

        static let name = "ib_web_take_state"
        static let sql = """
            WITH taken AS (
                DELETE FROM web_sign_in_states WHERE state_hash = $1::bytea AND expires_at > $5::timestamptz
                RETURNING tenant_id, provider
            )
            INSERT INTO web_sign_in_codes (code_hash, tenant_id, provider, grant_sealed, expires_at)
            SELECT $2::bytea, t.tenant_id, t.provider, $3::bytea, $4::timestamptz FROM taken t
            RETURNING 1::int4
            """

        let hash: Data
        let codeHash: Data
        let sealed: Data
        let codeExpiresAt: Date
        let now: Date

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 5)
            try bindings.append(hash)
            try bindings.append(codeHash)
            try bindings.append(sealed)
            bindings.append(codeExpiresAt)
            bindings.append(now)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Int32 { try row.decode(Int32.self) }
    }
}

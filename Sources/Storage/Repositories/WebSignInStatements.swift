import BrokerCore
import Foundation
import PostgresNIO

/// The statements of every web callback, prepared once per connection (decision 0038): the
/// state claimed by its hash (with the status of the account of the token's subject, decision
/// 0039; the claim, decision 0069), written by that claim when it came sealed (decision 0099),
/// and the state answered in the statement that keeps the sign-in under its broker code.
extension WebSignInRepository {
    /// The parts both claims are made of, so that a state is claimed by one rule whichever form
    /// it came in (`WebSignInClaimGridTests` runs both over every situation a row can be in).
    /// `$1` the state's hash, `$2` now, `$3` the subject (or NULL), `$4` the claim's end.
    enum ClaimFragments {
        /// The claim: a live state nobody answered, unclaimed or whose claim lapsed.
        static let claimable = """
            web_sign_in_states.expires_at > $2::timestamptz AND NOT web_sign_in_states.code_issued
                AND web_sign_in_states.error IS NULL
                AND (web_sign_in_states.claimed_until IS NULL OR web_sign_in_states.claimed_until <= $2::timestamptz)
            """
        static let returning = """
            RETURNING tenant_id, provider, client_id, redirect_uri, return_url, intent, caller_state, expires_at, provider_scope,
                oauth_client_id, oauth_request
            """
        // The account status: identity by its unique key, account by (tenant_id, id), both
        // bound in any plan (decision 0014): the account's id is the scalar subquery's value, not
        // a join column, which a plan made on empty tables left unbound and read every account
        // of the tenant through; only when a subject was given and the state has a scope. An
        // identity a consent revocation unlinked answers for the account its sign-in links to
        // again (`active` when the revocation disabled it), as the native check does.
        static let answer = """
            SELECT s.tenant_id, s.provider, s.client_id, s.redirect_uri, s.return_url, s.intent, s.caller_state, s.expires_at,
                s.provider_scope, s.oauth_client_id, s.oauth_request,
                ($3::text IS NOT NULL AND s.provider_scope IS NOT NULL) AS looked_up,
                COALESCE(
                    (SELECT a.status FROM accounts a
                        WHERE a.tenant_id = s.tenant_id AND a.id = (
                            SELECT i.account_id FROM identities i
                            WHERE i.tenant_id = s.tenant_id AND i.provider = s.provider AND i.provider_scope = s.provider_scope
                                AND i.subject = $3::text)),
                    (SELECT CASE WHEN a.status = 'disabled' AND a.disabled_reason = 'consent_revoked' THEN 'active' ELSE a.status END
                        FROM accounts a
                        WHERE a.tenant_id = s.tenant_id AND a.id = (
                            SELECT c.account_id FROM consent_revocations c
                            WHERE c.tenant_id = s.tenant_id AND c.provider = s.provider AND c.provider_scope = s.provider_scope
                                AND c.subject = $3::text))) AS account_status
            FROM s
            """

        /// `$1` to `$4`, the parameters both claims begin with.
        static func bindings(hash: Data, now: Date, subject: String?, claimUntil: Date, capacity: Int) throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: capacity)
            try bindings.append(hash)
            bindings.append(now)
            bindings.append(subject)
            bindings.append(claimUntil)
            return bindings
        }
    }

    /// Claims a state of a form written when its sign-in started (decision 0092 and before):
    /// the row is there, or the state is unknown.
    struct ClaimStateStatement: PostgresPreparedStatement {
        typealias Row = (state: WebSignInState, account: SubjectAccountStatus?)

        static let name = "ib_web_claim_state"
        static let sql = """
            WITH s AS (
                UPDATE web_sign_in_states SET claimed_until = $4::timestamptz
                WHERE state_hash = $1::bytea AND \(ClaimFragments.claimable)
                \(ClaimFragments.returning)
            )
            \(ClaimFragments.answer)
            """

        let hash: Data
        let now: Date
        let claimUntil: Date
        let subject: String?

        func makeBindings() throws -> PostgresBindings {
            try ClaimFragments.bindings(hash: hash, now: now, subject: subject, claimUntil: claimUntil, capacity: 4)
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { try Self.decode(row, hash: hash, subject: subject) }

        static func decode(_ row: PostgresRow, hash: Data, subject: String?) throws -> Row {
            var reader = RowReader(row)
            let (tenantID, provider, clientID, redirectURI, returnURL, intent, callerState, expiresAt, scope) = (
                try reader.next(UUID.self), try reader.next(String.self), try reader.next(String.self), try reader.next(String.self),
                try reader.next(String.self), try reader.next(String.self), try reader.next(String?.self), try reader.next(Date.self),
                try reader.next(String?.self)
            )
            let (oauthClientID, oauthRequest) = (try reader.next(String?.self), try reader.next(String?.self))
            let (lookedUp, status) = (try reader.next(Bool.self), try reader.next(String?.self))
            // A relying party's request that does not read back is no request: the callback then
            // finds no client to answer and refuses the state.
            let relyingParty = oauthClientID.flatMap { client in
                oauthRequest.flatMap(KeptClientRequest.init(json:)).map { WebSignInState.RelyingParty(clientID: client, request: $0) }
            }
            let state = WebSignInState(
                stateHash: hash, tenantID: tenantID, provider: provider, clientID: clientID, redirectURI: redirectURI, returnURL: returnURL,
                intent: SignInIntent(rawValue: intent) ?? .signIn, callerState: callerState, expiresAt: expiresAt, providerScope: scope,
                relyingParty: relyingParty)
            guard lookedUp, let subject else { return (state, nil) }
            return (state, SubjectAccountStatus(subject: subject, status: status.map { AccountStatus(rawValue: $0) ?? .disabled }))
        }
    }

    /// Claims a sealed state (decision 0099): its sign-in is written here, by its first claim,
    /// when it has not expired; a state already written is claimed as ``ClaimStateStatement``
    /// claims it.
    struct ClaimSealedStateStatement: PostgresPreparedStatement {
        typealias Row = ClaimStateStatement.Row

        static let name = "ib_web_claim_sealed_state"
        static let sql = """
            WITH s AS (
                INSERT INTO web_sign_in_states
                    (state_hash, claimed_until, tenant_id, provider, client_id, redirect_uri, return_url, intent, caller_state, expires_at,
                    provider_scope, oauth_client_id, oauth_request)
                SELECT $1::bytea, $4::timestamptz, $5::uuid, $6::text, $7::text, $8::text, $9::text, $10::text, $11::text,
                    $12::timestamptz, $13::text, $14::text, $15::text
                WHERE $12::timestamptz > $2::timestamptz
                ON CONFLICT (state_hash) DO UPDATE SET claimed_until = $4::timestamptz
                WHERE \(ClaimFragments.claimable)
                \(ClaimFragments.returning)
            )
            \(ClaimFragments.answer)
            """

        let state: WebSignInState
        let now: Date
        let claimUntil: Date
        let subject: String?

        func makeBindings() throws -> PostgresBindings {
            var bindings = try ClaimFragments.bindings(
                hash: state.stateHash, now: now, subject: subject, claimUntil: claimUntil, capacity: 15)
            bindings.append(state.tenantID)
            bindings.append(state.provider)
            bindings.append(state.clientID)
            bindings.append(state.redirectURI)
            bindings.append(state.returnURL)
            bindings.append(state.intent.rawValue)
            bindings.append(state.callerState)
            bindings.append(state.expiresAt)
            bindings.append(state.providerScope)
            bindings.append(state.relyingParty?.clientID)
            bindings.append(state.relyingParty?.request.json)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { try ClaimStateStatement.decode(row, hash: state.stateHash, subject: subject) }
    }

    /// The parts of a state's answer with a code, so that a state is answered by one rule
    /// whether its code is kept on its own (``TakeStateStatement``) or by the statement that
    /// signs a relying party's person in (``SignInRules/codeKeeping(opened:)``, decision 0100).
    enum TakeFragments {
        /// The state `s` may be answered with a code at `now`: unexpired and answered by nobody
        /// (claimed or not: a claim only keeps a second callback from redeeming the provider's
        /// code meanwhile).
        static func answerable(_ s: String, now: String) -> String {
            "\(s).expires_at > \(now) AND NOT \(s).code_issued AND \(s).error IS NULL"
        }

        /// The state answered with a code: its claim ends with it.
        static let answered = "code_issued = true, claimed_until = NULL"

        /// The code's row: its hash, then the state's tenant, provider and relying party, then
        /// the grant, expiry and session.
        static let codeColumns = "code_hash, tenant_id, provider, grant_sealed, expires_at, oauth_client_id, session_id"
    }

    struct TakeStateStatement: PostgresPreparedStatement {
        typealias Row = Int32

        static let name = "ib_web_take_state"
        static let sql = """
            WITH taken AS (
                UPDATE web_sign_in_states SET \(TakeFragments.answered)
                WHERE state_hash = $1::bytea AND \(TakeFragments.answerable("web_sign_in_states", now: "$5::timestamptz"))
                RETURNING tenant_id, provider, oauth_client_id
            )
            INSERT INTO web_sign_in_codes (\(TakeFragments.codeColumns))
            SELECT $2::bytea, t.tenant_id, t.provider, $3::bytea, $4::timestamptz, t.oauth_client_id, $6::uuid FROM taken t
            RETURNING 1::int4
            """

        let hash: Data
        let codeHash: Data
        let sealed: Data
        let codeExpiresAt: Date
        let now: Date
        /// The session a relying party's sign-in opened at the callback (decision 0085).
        let sessionID: UUID?

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 6)
            try bindings.append(hash)
            try bindings.append(codeHash)
            try bindings.append(sealed)
            bindings.append(codeExpiresAt)
            bindings.append(now)
            bindings.append(sessionID)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Int32 { try row.decode(Int32.self) }
    }
}

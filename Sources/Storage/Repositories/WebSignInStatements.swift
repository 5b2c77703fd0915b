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
            RETURNING state_hash, tenant_id, provider, client_id, redirect_uri, return_url, intent, caller_state, expires_at,
                provider_scope, oauth_client_id, oauth_request
            """
        // The account status: identity by its unique key, account by (tenant_id, id), both
        // bound in any plan (decision 0014): the account's id is the scalar subquery's value, not
        // a join column, which a plan made on empty tables left unbound and read every account
        // of the tenant through; only when a subject was given and the state has a scope. An
        // identity a consent revocation unlinked answers for the account its sign-in links to
        // again (`active` when the revocation disabled it), as the native check does.
        static let answer = answer(subject: "$3::text", from: "s")

        /// The answer of each claimed state `s` in `from`, the subject's account looked up by
        /// `subject`; `leading`: columns before the state's (a batch's element number).
        static func answer(subject: String, from: String, leading: String = "") -> String {
            """
            SELECT \(leading)s.tenant_id, s.provider, s.client_id, s.redirect_uri, s.return_url, s.intent, s.caller_state, s.expires_at,
                s.provider_scope, s.oauth_client_id, s.oauth_request,
                (\(subject) IS NOT NULL AND s.provider_scope IS NOT NULL) AS looked_up,
                COALESCE(
                    (SELECT a.status FROM accounts a
                        WHERE a.tenant_id = s.tenant_id AND a.id = (
                            SELECT i.account_id FROM identities i
                            WHERE i.tenant_id = s.tenant_id AND i.provider = s.provider AND i.provider_scope = s.provider_scope
                                AND i.subject = \(subject))),
                    (SELECT CASE WHEN a.status = 'disabled' AND a.disabled_reason = 'consent_revoked' THEN 'active' ELSE a.status END
                        FROM accounts a
                        WHERE a.tenant_id = s.tenant_id AND a.id = (
                            SELECT c.account_id FROM consent_revocations c
                            WHERE c.tenant_id = s.tenant_id AND c.provider = s.provider AND c.provider_scope = s.provider_scope
                                AND c.subject = \(subject)))) AS account_status
            FROM \(from)
            """
        }

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
            return try decode(&reader, hash: hash, subject: subject)
        }

        /// The claimed state and the subject's account, from `reader` on (the columns of
        /// ``ClaimFragments/answer(subject:from:leading:)``).
        static func decode(_ reader: inout RowReader, hash: Data, subject: String?) throws -> Row {
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

    /// Claims sealed states (decision 0099), one or a batch of them at once: each state's sign-in
    /// is written here, by its first claim, when it has not expired; a state already written is
    /// claimed as ``ClaimStateStatement`` claims it. The states travel as one JSON array (one
    /// parameter whatever the batch's size: one prepared statement, one generic plan), `$2` the
    /// batch's clock. Each row is written or claimed through the unique index on `state_hash`
    /// (`ON CONFLICT`'s arbiter), in the order of the elements, which the caller sorts by state
    /// hash; no two elements carry one state. An element whose state was not claimed returns
    /// no row.
    struct ClaimSealedStatesStatement: PostgresPreparedStatement {
        typealias Row = PostgresRow

        static let name = "ib_web_claim_sealed_states"
        static let sql = """
            WITH posted AS MATERIALIZED (
                SELECT r.n, decode(r.state_hash, 'hex') AS state_hash, \(instant("claimed_until")) AS claimed_until, r.subject,
                    r.tenant_id, r.provider, r.client_id, r.redirect_uri, r.return_url, r.intent, r.caller_state,
                    \(instant("expires_at")) AS expires_at, r.provider_scope, r.oauth_client_id, r.oauth_request
                FROM json_to_recordset($1::text::json) AS r(n int, state_hash text, claimed_until int8, subject text, tenant_id uuid,
                    provider text, client_id text, redirect_uri text, return_url text, intent text, caller_state text, expires_at int8,
                    provider_scope text, oauth_client_id text, oauth_request text)
            ),
            s AS (
                INSERT INTO web_sign_in_states
                    (state_hash, claimed_until, tenant_id, provider, client_id, redirect_uri, return_url, intent, caller_state, expires_at,
                    provider_scope, oauth_client_id, oauth_request)
                SELECT p.state_hash, p.claimed_until, p.tenant_id, p.provider, p.client_id, p.redirect_uri, p.return_url, p.intent,
                    p.caller_state, p.expires_at, p.provider_scope, p.oauth_client_id, p.oauth_request
                FROM posted p
                WHERE p.expires_at > $2::timestamptz
                ORDER BY p.n
                ON CONFLICT (state_hash) DO UPDATE SET claimed_until = EXCLUDED.claimed_until
                WHERE \(ClaimFragments.claimable)
                \(ClaimFragments.returning)
            )
            \(ClaimFragments.answer(subject: "p.subject", from: "s JOIN posted p ON p.state_hash = s.state_hash", leading: "p.n, "))
            """

        /// Microseconds since 1970 (``UnixTime/microseconds(_:)``) as the instant, exactly.
        private static func instant(_ member: String) -> String {
            "(timestamptz 'epoch' + r.\(member) * interval '1 microsecond')"
        }

        struct Element: Sendable {
            let state: WebSignInState
            let claimUntil: Date
            let subject: String?
        }

        let elements: [Element]
        let now: Date

        func makeBindings() throws -> PostgresBindings {
            var writer = JSONWriter(capacity: 700 * elements.count)
            writer.beginArray()
            for (n, element) in elements.enumerated() {
                let state = element.state
                writer.beginObject()
                writer.member("n", n)
                writer.member("state_hash", Hex.encode(state.stateHash))
                writer.member("claimed_until", UnixTime.microseconds(element.claimUntil))
                writer.member("subject", element.subject)
                writer.member("tenant_id", state.tenantID.lowercasedString)
                writer.member("provider", state.provider)
                writer.member("client_id", state.clientID)
                writer.member("redirect_uri", state.redirectURI)
                writer.member("return_url", state.returnURL)
                writer.member("intent", state.intent.rawValue)
                writer.member("caller_state", state.callerState)
                writer.member("expires_at", UnixTime.microseconds(state.expiresAt))
                writer.member("provider_scope", state.providerScope)
                writer.member("oauth_client_id", state.relyingParty?.clientID)
                writer.member("oauth_request", state.relyingParty?.request.json)
                writer.endObject()
            }
            writer.endArray()
            var bindings = PostgresBindings(capacity: 2)
            bindings.append(String(decoding: writer.bytes, as: UTF8.self))
            bindings.append(now)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }

        /// Each element's claim, in the elements' order (nil: not claimed).
        func claims(_ rows: [PostgresRow]) throws -> [ClaimStateStatement.Row?] {
            var claims = [ClaimStateStatement.Row?](repeating: nil, count: elements.count)
            for row in rows {
                var reader = RowReader(row)
                let n = Int(try reader.next(Int32.self))
                guard claims.indices.contains(n) else { throw BatchMismatch() }
                let element = elements[n]
                claims[n] = try ClaimStateStatement.decode(&reader, hash: element.state.stateHash, subject: element.subject)
            }
            return claims
        }
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

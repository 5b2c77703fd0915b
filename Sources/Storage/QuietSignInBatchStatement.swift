import BrokerCore
import Foundation
import Logging
import PostgresNIO

extension AccountRepository {
    /// The returning sign-in that brings nothing new, as one lean statement, for one request or
    /// for several in one commit (decision 0030): the identity and its active account when
    /// nothing posted differs from what is stored, then the session with its first refresh
    /// token. Exactly the `quiet` path of ``SignInStatement``, without initializing that
    /// statement's insert, upsert and update plans (measured with pgbench, for one request:
    /// 8,700–9,200 vs 6,100–6,400 statements/s). An element whose conditions fail returns no
    /// row and writes nothing; the caller then runs ``SignInStatement`` for it. A posted
    /// provider refresh token is never quiet: the caller does not try this statement then. The
    /// stamps it returns are this sign-in's (decision 0013). The requests travel as one
    /// JSON array (one parameter, whatever the batch's size: one prepared statement, one generic
    /// plan). Each element's identity is read by its unique key and its account by
    /// `(tenant_id, id)` in a LATERAL subquery with `LIMIT 1`, which the planner cannot flatten
    /// into a join: every plan is a loop over the posted elements with both lookups bound to
    /// the element's values (decision 0014). Sessions are inserted with `ON CONFLICT (id) DO
    /// NOTHING`: an element whose session id (its identity token's replay key, decision 0018)
    /// is taken returns its row with `opened` false and writes nothing, while the others of the
    /// batch open theirs. A session opened past the tenant's cap revokes the account's oldest
    /// open ones (`k`, decision 0051); the exact, sorted read of its open sessions runs only when
    /// the account has at least `k` sessions of any state (an index-only probe), so the usual
    /// sign-in pays for a probe of a few index entries, not a sort.
    struct QuietSignInBatchStatement: PostgresPreparedStatement {
        typealias Row = PostgresRow

        static let name = "ib_quiet_sign_in_batch"

        /// The posted elements, in batch order; no two with one session id.
        let requests: [SignInRequest]

        /// The elements whose sign-in is quiet (`condition`: only those of posted elements `p`
        /// that meet it), with the identity and the active account each found: the CTE
        /// ``FirstSignInBatchStatement`` shares.
        static func quietCTE(_ condition: String? = nil) -> String {
            """
            quiet AS MATERIALIZED (
                SELECT p.n, p.id AS session_id, a.id AS quiet_account_id, i.id AS quiet_identity_id, a.*, i.*
                FROM posted p
                CROSS JOIN LATERAL (
                    SELECT \(quietIdentityColumns)
                    FROM identities i
                    WHERE i.tenant_id = p.t AND i.provider = p.p AND i.provider_scope = p.s AND i.subject = p.u
                        AND (p.e IS NULL OR (i.email = p.e AND i.email_verified = p.ev AND i.is_private_email = p.pe))
                        AND (p.gn IS NULL OR i.given_name IS NOT NULL)
                        AND (p.fn IS NULL OR i.family_name IS NOT NULL)
                        AND (p.r IS NULL OR i.real_user_status = p.r)
                        AND (p.a IS NULL OR i.attributes @> p.a::jsonb)
                    LIMIT 1
                    -- The identity before the account, as every statement that touches an
                    -- account takes them (issue 39 C10): the session's foreign key would take
                    -- this lock only after the account's, and deadlock with a deletion.
                    FOR KEY SHARE) i
                CROSS JOIN LATERAL (
                    SELECT \(quietAccountColumns)
                    FROM accounts a
                    WHERE a.tenant_id = p.t AND a.id = i.account_id AND a.status = 'active'
                    LIMIT 1) a
                \(condition.map { "WHERE \($0)" } ?? "")
            )
            """
        }

        /// The quiet elements' sessions; a taken session id opens nothing (a replay).
        static let openedCTE = """
            opened AS (
                INSERT INTO sessions (id, tenant_id, account_id, identity_id, client_id, platform, idp, expires_at,
                    refresh_token_hash, refresh_token_expires_at)
                SELECT p.id, p.t, q.quiet_account_id, q.quiet_identity_id, p.c, p.pf, p.p,
                    to_timestamp(p.x::float8 / 1000000), decode(p.h, 'hex'), to_timestamp(p.hx::float8 / 1000000)
                FROM quiet q JOIN posted p ON p.n = q.n
                ON CONFLICT (id) DO NOTHING
                RETURNING id
            )
            """

        /// The session cap on the quiet elements' accounts, after `opened` (decision 0051).
        static let cappedCTE = batchSessionCapCTE(
            elements: "quiet q JOIN posted p ON p.n = q.n", opened: " JOIN opened ON opened.id = q.session_id",
            account: "q.quiet_account_id")

        /// The session cap of a batch (decision 0051): `elements` joins the elements that may
        /// have opened a session with `posted p` (for `p.t` and the cap `p.k`), `opened` limits
        /// them to those that did, and `account` is the account id of each. The statement does
        /// not see its own new sessions, so the newest `k - 1` others stay open.
        static func batchSessionCapCTE(elements: String, opened: String, account: String) -> String {
            """
            capped AS (
                UPDATE sessions s SET revoked_at = now(), revoke_reason = 'session_limit'
                WHERE EXISTS (
                        SELECT 1 FROM \(elements)
                        WHERE EXISTS (SELECT 1 FROM sessions c WHERE c.account_id = \(account) OFFSET p.k - 1 LIMIT 1))
                    AND s.tenant_id = ANY(ARRAY(SELECT p.t FROM posted p)) AND s.revoked_at IS NULL AND s.id = ANY(ARRAY(
                    SELECT x.id FROM \(elements)\(opened)
                    CROSS JOIN LATERAL (
                        SELECT o.id FROM sessions o
                        WHERE o.tenant_id = p.t AND o.account_id = \(account) AND o.revoked_at IS NULL AND o.expires_at > now()
                        ORDER BY o.created_at DESC, o.id DESC OFFSET p.k - 1) x))
            )
            """
        }

        static let sql = """
            WITH posted AS MATERIALIZED (
                SELECT * FROM json_to_recordset($1::text::json) AS p(n int, t uuid, p text, s text, u text, e text,
                    ev bool, pe bool, gn text, fn text, r int8, a text, id uuid, c text, pf text, x int8, h text, hx int8, k int)
            ),
            \(quietCTE()),
            \(openedCTE),
            \(cappedCTE)
            SELECT q.session_id IN (SELECT o.id FROM opened o) AS opened, q.*
            FROM quiet q
            """

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 1)
            bindings.append(Self.json(requests))
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }

        /// The batch as `[{"n": 0, "t": tenant, "p": provider, …}, …]`.
        static func json(_ requests: [SignInRequest]) -> String {
            var writer = JSONWriter(capacity: 512 * requests.count)
            writer.beginArray()
            for (n, request) in requests.enumerated() {
                writer.beginObject()
                writeElement(n, request, to: &writer)
                writer.endObject()
            }
            writer.endArray()
            return String(decoding: writer.bytes, as: UTF8.self)
        }

        /// One posted sign-in's members, which ``FirstSignInBatchStatement`` posts too.
        static func writeElement(_ n: Int, _ request: SignInRequest, to writer: inout JSONWriter) {
            writer.member("n", n)
            writer.member("t", request.tenantID.lowercasedString)
            writer.member("p", request.provider)
            writer.member("s", request.providerScope)
            writer.member("u", request.subject)
            writer.member("e", request.email.flatMap { $0.isEmpty ? nil : $0 })
            writer.member("ev", request.emailVerified)
            writer.member("pe", request.isPrivateEmail)
            writer.member("gn", request.name.givenName.flatMap { $0.isEmpty ? nil : $0 })
            writer.member("fn", request.name.familyName.flatMap { $0.isEmpty ? nil : $0 })
            writer.member("r", request.realUserStatus)
            writer.member("a", IdentityAttributes.encode(request.attributes))
            writer.member("id", request.session.id.lowercasedString)
            writer.member("c", request.clientID)
            writer.member("pf", request.platform)
            writer.member("x", microseconds(request.session.expiresAt))
            writer.member("h", Hex.encode(request.session.refreshTokenHash))
            writer.member("hx", microseconds(request.session.refreshTokenExpiresAt))
            writer.member("k", request.maxOpenSessions)
        }

        private static func microseconds(_ date: Date) -> Int { UnixTime.microseconds(date) }
    }
}

/// What a quiet sign-in found: the session it opened, nothing quiet (the full statement
/// follows), or a session id that is taken (a replayed identity token).
enum QuietSignInOutcome: Sendable {
    case opened(SignInResult)
    case notQuiet
    case replayed
}

typealias QuietSignIns = StatementBatcher<SignInRequest, Result<QuietSignInOutcome, any Error>>

extension AccountRepository {
    /// Each batch runs on the pool in use when it starts (``DatabasePool``).
    static func quietSignIns(pool: DatabasePool, logger: Logger, maxRunning: Int, timeout: Duration) -> QuietSignIns? {
        signInBatcher(maxRunning: maxRunning, timeout: timeout) { try await quietSignIns($0, client: pool.client, logger: logger) }
    }

    /// A batcher of sign-ins (up to 32 a batch) that runs `run` for each batch in the scope of
    /// its tenant, each element failing alone; nil when batching is off (`maxRunning` 0).
    static func signInBatcher<Outcome: Sendable>(
        maxRunning: Int, timeout: Duration, _ run: @escaping @Sendable ([SignInRequest]) async throws -> [Outcome]
    ) -> StatementBatcher<SignInRequest, Result<Outcome, any Error>>? {
        guard maxRunning > 0 else { return nil }
        return StatementBatcher(maxRunning: maxRunning, maxBatch: 32, timeout: timeout) { requests in
            try await TenantScope.shared(by: requests.lazy.map(\.tenantID), because: "a batch carries several tenants' sign-ins") {
                try await inLockOrder(requests) { try await failingAlone($0, run) }
            }
        }
    }

    /// Runs a batch with its elements in the order of their identities' keys, and gives the
    /// outcomes back in the batch's order. A statement takes its rows' locks in its elements'
    /// order: two batches holding sign-ins of the same accounts in opposite orders deadlocked
    /// each other, again on every retry (issue 39 C10). In one order they wait instead. Sign-ins
    /// of one identity keep their arrival order.
    static func inLockOrder<Outcome>(
        _ requests: [SignInRequest], _ run: ([SignInRequest]) async throws -> [Result<Outcome, any Error>]
    ) async throws -> [Result<Outcome, any Error>] {
        guard requests.count > 1 else { return try await run(requests) }
        let keys = requests.map { request in
            Array("\(request.tenantID.lowercasedString)\u{0}\(request.provider)\u{0}\(request.providerScope)\u{0}\(request.subject)".utf8)
        }
        let order = requests.indices.sorted { a, b in
            keys[a] == keys[b] ? a < b : keys[a].lexicographicallyPrecedes(keys[b])
        }
        let results = try await run(order.map { requests[$0] })
        guard results.count == requests.count else { throw BatchMismatch() }
        var restored = results
        for (position, index) in order.enumerated() { restored[index] = results[position] }
        return restored
    }

    /// A batch whose failure one element caused (a value PostgreSQL cannot store, a row deleted
    /// under it) runs again element by element, so that element fails alone.
    static func failingAlone<Outcome>(
        _ requests: [SignInRequest], _ run: ([SignInRequest]) async throws -> [Outcome]
    ) async throws -> [Result<Outcome, any Error>] {
        do {
            return try await run(requests).map { .success($0) }
        } catch let error where requests.count > 1 && error.postgresError.map(isAboutOneElement) == true {
            var results: [Result<Outcome, any Error>] = []
            for request in requests {
                do { results.append(.success(try await run([request])[0])) } catch { results.append(.failure(error)) }
            }
            return results
        }
    }

    /// Data exceptions (class 22), integrity violations (23) and transaction rollbacks (40):
    /// failures one element can cause. Not timeouts, connection failures or shutdowns, which
    /// would only repeat for each element.
    static func isAboutOneElement(_ error: PSQLError) -> Bool {
        guard let state = error.sqlState else { return false }
        return state.hasPrefix("22") || state.hasPrefix("23") || state.hasPrefix("40")
    }

    /// One batch: the first request of each session id goes to the statement; a later one with
    /// the same id (one identity token posted twice at once) is a replay when the first opened
    /// its session, else not quiet either.
    static func quietSignIns(_ requests: [SignInRequest], client: PostgresClient, logger: Logger) async throws
        -> [QuietSignInOutcome]
    {
        let (posted, postedIndex) = firstOfEachSession(requests)
        var outcomes = [QuietSignInOutcome](repeating: .notQuiet, count: posted.count)
        let rows = try await client.rows(QuietSignInBatchStatement(requests: posted), logger: logger)
        for row in rows {
            var reader = RowReader(row)
            let opened: Bool = try reader.next()
            let n = Int(try reader.next(Int32.self))
            guard outcomes.indices.contains(n) else { throw BatchMismatch() }
            _ = try reader.next(UUID.self)  // session id
            _ = try reader.next(UUID.self)  // account id
            _ = try reader.next(UUID.self)  // identity id
            let account = try decodeAccount(&reader)
            let identity = try decodeIdentity(&reader)
            outcomes[n] =
                opened
                ? .opened(SignInResult(account: account, identity: identity, isNewAccount: false, sessionID: posted[n].session.id))
                : .replayed
        }
        return postedIndex.map { index in
            guard index < 0 else { return outcomes[index] }
            if case .opened = outcomes[-1 - index] { return .replayed }
            return .notQuiet
        }
    }

    /// The requests to post, the first of each session id, and where each request's outcome is:
    /// its index among them, or `-1 - i` for a later request with the session id of the `i`th.
    static func firstOfEachSession(_ requests: [SignInRequest]) -> (posted: [SignInRequest], index: [Int]) {
        var posted: [SignInRequest] = []
        var postedIndex: [Int] = []
        var firstOfSession: [UUID: Int] = [:]
        for request in requests {
            if let first = firstOfSession[request.session.id] {
                postedIndex.append(-1 - first)
            } else {
                firstOfSession[request.session.id] = posted.count
                postedIndex.append(posted.count)
                posted.append(request)
            }
        }
        return (posted, postedIndex)
    }
}

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

        /// The elements whose sign-in is quiet, with the identity and the active account each
        /// found: the CTE ``FirstSignInBatchStatement`` shares. The identity is read by its
        /// key and the quiet rule (``SignInRules/quiet(_:_:)``), which a posted provider
        /// refresh token never meets.
        static let quietCTE = """
            quiet AS MATERIALIZED (
                SELECT p.n, p.session_id, a.id AS quiet_account_id, i.id AS quiet_identity_id, a.*, i.*
                FROM posted p
                CROSS JOIN LATERAL (
                    SELECT \(quietIdentityColumns)
                    FROM identities i
                    WHERE \(SignInRules.identityKey("i"))
                        AND \(SignInRules.quiet())
                    LIMIT 1
                    -- The identity before the account, as every statement that touches an
                    -- account takes them (issue 39 C10): the session's foreign key would take
                    -- this lock only after the account's, and deadlock with a deletion.
                    FOR KEY SHARE) i
                CROSS JOIN LATERAL (
                    SELECT \(quietAccountColumns)
                    FROM accounts a
                    WHERE a.tenant_id = p.tenant_id AND a.id = i.account_id AND a.status = 'active'
                    LIMIT 1) a
            )
            """

        /// The quiet elements' sessions; a taken session id opens nothing (a replay).
        static let openedCTE = """
            opened AS (
                \(SignInRules.sessionInsert(account: "q.quiet_account_id", identity: "q.quiet_identity_id"))
                FROM quiet q JOIN posted p ON p.n = q.n
                ON CONFLICT (id) DO NOTHING
                RETURNING id
            )
            """

        /// The session cap on the quiet elements' accounts, after `opened` (decision 0051).
        static let cappedCTE = SignInRules.sessionCap(
            elements: "quiet q JOIN posted p ON p.n = q.n", opened: " JOIN opened ON opened.id = q.session_id",
            account: "q.quiet_account_id")

        static let sql = """
            WITH \(PostedSignIns.cte),
            \(quietCTE),
            \(openedCTE),
            \(cappedCTE)
            SELECT q.session_id IN (SELECT o.id FROM opened o) AS opened, q.*
            FROM quiet q
            """

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 1)
            bindings.append(PostedSignIns.json(requests))
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
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

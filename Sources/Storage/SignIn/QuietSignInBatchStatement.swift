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
    struct QuietSignInBatchStatement: PostedBatchStatement {
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

        static let sql = text(keepingCodes: false)

        /// The statement; `keepingCodes`: the form a batch with a relying party's code takes
        /// (``QuietCodeKeepingBatchStatement``, decision 0100), the same with the code kept.
        static func text(keepingCodes: Bool) -> String {
            let keeping = keepingCodes ? ",\n" + SignInRules.codeKeeping(opened: "SELECT o.id FROM opened o") : ""
            return """
                WITH \(PostedSignIns.cte),
                \(quietCTE),
                \(openedCTE),
                \(cappedCTE)\(keeping)
                SELECT q.session_id IN (SELECT o.id FROM opened o) AS opened,
                    \(keepingCodes ? SignInRules.codeKept(session: "q.session_id") : "false") AS code_kept, q.*
                FROM quiet q
                """
        }
    }
}

extension AccountRepository {
    /// ``QuietSignInBatchStatement`` keeping the relying parties' codes its elements post, in
    /// its commit (decision 0100): a batch with one runs it.
    struct QuietCodeKeepingBatchStatement: PostedBatchStatement {
        typealias Row = PostgresRow

        static let name = "ib_quiet_sign_in_code_batch"
        static let sql = QuietSignInBatchStatement.text(keepingCodes: true)

        let requests: [SignInRequest]
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

    /// One batch: the first request of each session id goes to the statement; a later one with
    /// the same id (one identity token posted twice at once) is a replay when the first opened
    /// its session, else not quiet either.
    static func quietSignIns(_ requests: [SignInRequest], client: PostgresClient, logger: Logger) async throws
        -> [QuietSignInOutcome]
    {
        let repeated = { (first: QuietSignInOutcome) -> QuietSignInOutcome in
            if case .opened = first { return .replayed }
            return .notQuiet
        }
        guard requests.contains(where: { $0.keptCode != nil }) else {
            return try await postedBatch(
                requests, client: client, logger: logger, statement: QuietSignInBatchStatement.init, unanswered: .notQuiet,
                read: readQuiet, repeated: repeated)
        }
        return try await postedBatch(
            SignInRules.codesKept(requests), client: client, logger: logger, statement: QuietCodeKeepingBatchStatement.init,
            unanswered: .notQuiet,
            read: readQuiet, repeated: repeated)
    }

    /// One row of either form of the quiet statement.
    private static func readQuiet(_ reader: inout RowReader, _ posted: [SignInRequest]) throws -> (n: Int, outcome: QuietSignInOutcome) {
        let opened: Bool = try reader.next()
        let codeKept: Bool = try reader.next()
        let n = Int(try reader.next(Int32.self))
        _ = try reader.next(UUID.self)  // session id
        _ = try reader.next(UUID.self)  // account id
        _ = try reader.next(UUID.self)  // identity id
        let account = try decodeAccount(&reader)
        let identity = try decodeIdentity(&reader)
        guard opened, posted.indices.contains(n) else { return (n, .replayed) }
        return (
            n,
            .opened(
                SignInResult(
                    account: account, identity: identity, isNewAccount: false, sessionID: posted[n].session.id,
                    codeKept: posted[n].keptCode == nil ? nil : codeKept))
        )
    }
}

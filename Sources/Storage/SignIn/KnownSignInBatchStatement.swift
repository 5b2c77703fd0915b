import BrokerCore
import Foundation
import Logging
import PostgresNIO

extension AccountRepository {
    /// A sign-in of a stored identity that brings something new for it, when this process has
    /// not signed that identity in before: the first sign-in after an import (the token brings
    /// Apple's `real_user_status` or attributes an import cannot know), or after a person
    /// changed an email at the provider. ``FirstSignInBatchStatement`` answers `known` for it.
    /// For one request or for several in one commit, like the quiet and first sign-ins.
    ///
    /// It writes what ``SignInStatement`` writes on that path and nothing else: the identity
    /// updated from the token (``SignInRules/identityUpdate``), its account updated from the identity
    /// (``SignInRules/accountUpdate``), the session with its first refresh token, and the session cap
    /// (decision 0051). The two `SET` lists are shared with that statement as text, the cap
    /// with the quiet and first-sign-in batches. Its plan has four table modifications where
    /// the full statement has nine (decision 0063).
    ///
    /// An element applies only when its identity is stored, its sign-in not quiet
    /// (``SignInRules/quiet(_:_:)``: the full statement writes no identity row then), and its
    /// account active, and only
    /// the first element of each account in the batch (two elements of one account in one
    /// statement would each update it from a row the other's update does not see). Any other
    /// element returns no row and writes nothing, and the caller runs the full statement for
    /// it, which decides as before. A posted provider refresh token (an Apple code sign-in's) is
    /// one more brought column (``SignInColumns``): it makes the sign-in not quiet, and the
    /// identity's `SET` list stores it (decision 0091). A taken session id fails the statement, as it fails the full one; the batch then
    /// runs element by element and only that element fails (a replay, nothing written).
    /// Identities and accounts are reached per element through their keys: LATERAL lookups
    /// with `LIMIT 1`, the identity updated through its unique key, the account through
    /// `= ANY` of the ids the lookups found (decision 0014). The account's two keys are joined
    /// from one row (`stored`): when the tenant came from `posted` and the id from `upserted`,
    /// a plan made on near-empty tables read the account through `(tenant_id, id)` with only the
    /// tenant bound (a path that needs fewer joined rows wins a tie of costs), so every
    /// returning sign-in that stored a provider refresh token read every account of its
    /// tenant (`HotStatementPlanTests`). The tenants' `= ANY` keeps the plan made on empty
    /// tables off a sequential scan of `accounts`, which it takes with the ids' alone.
    struct KnownSignInBatchStatement: PostedBatchStatement {
        typealias Row = PostgresRow

        static let name = "ib_known_sign_in_batch"

        /// The posted elements, in batch order; no two with one session id.
        let requests: [SignInRequest]

        static let sql = text(keepingCodes: false)

        /// The statement; `keepingCodes`: the form a batch with a relying party's code takes
        /// (``KnownCodeKeepingBatchStatement``, decision 0100), the same with the code kept. It
        /// opens a session for each element whose account it updated.
        static func text(keepingCodes: Bool) -> String {
            let opened = "SELECT p.session_id FROM account a JOIN posted p ON p.n = a.n"
            let keeping = keepingCodes ? ",\n" + SignInRules.codeKeeping(opened: opened) : ""
            let kept = keepingCodes ? SignInRules.codeKept(session: "p.session_id") : "false"
            let posted = keepingCodes ? " JOIN posted p ON p.n = a.n" : ""
            return """
                WITH \(PostedSignIns.cte),
                stored AS MATERIALIZED (
                    SELECT DISTINCT ON (i.account_id) p.n, i.account_id, p.tenant_id
                    FROM posted p
                    CROSS JOIN LATERAL (
                        SELECT i.account_id FROM identities i
                        WHERE \(SignInRules.identityKey("i"))
                            AND NOT coalesce(\(SignInRules.quiet()), false)
                        LIMIT 1) i
                    CROSS JOIN LATERAL (
                        SELECT 1 FROM accounts a WHERE a.tenant_id = p.tenant_id AND a.id = i.account_id AND a.status = 'active' LIMIT 1) a
                    ORDER BY i.account_id, p.n
                ),
                upserted AS (
                    UPDATE identities i SET
                        \(SignInRules.identityUpdate)
                    FROM (
                        SELECT s.n, p.tenant_id, p.provider, p.provider_scope, p.subject, \(SignInRules.broughtIdentity())
                        FROM stored s JOIN posted p ON p.n = s.n
                    ) AS excluded
                    WHERE \(SignInRules.identityKey("i", "excluded"))
                    RETURNING excluded.n, \(identityColumns)
                ),
                account AS (
                    UPDATE accounts a SET
                        \(SignInRules.accountUpdate)
                    FROM stored s JOIN upserted u ON u.n = s.n JOIN posted p ON p.n = s.n
                    WHERE a.id = ANY(ARRAY(SELECT s.account_id FROM stored s)) AND a.tenant_id = ANY(ARRAY(SELECT p.tenant_id FROM posted p))
                        AND a.id = s.account_id AND a.tenant_id = s.tenant_id AND a.status = 'active'
                    RETURNING u.n, \(accountColumns)
                ),
                opened AS (
                    \(SignInRules.sessionInsert(account: "a.id", identity: "u.id"))
                    FROM account a JOIN upserted u ON u.n = a.n JOIN posted p ON p.n = a.n
                ),
                \(SignInRules.sessionCap(elements: "account a JOIN posted p ON p.n = a.n", opened: "", account: "a.id"))\(keeping)
                SELECT \(kept) AS code_kept, a.*, u.* FROM account a JOIN upserted u ON u.n = a.n\(posted)
                """
        }
    }
}

extension AccountRepository {
    /// ``KnownSignInBatchStatement`` keeping the relying parties' codes its elements post, in
    /// its commit (decision 0100): a batch with one runs it.
    struct KnownCodeKeepingBatchStatement: PostedBatchStatement {
        typealias Row = PostgresRow

        static let name = "ib_known_sign_in_code_batch"
        static let sql = KnownSignInBatchStatement.text(keepingCodes: true)

        let requests: [SignInRequest]
    }
}

typealias KnownSignIns = StatementBatcher<SignInRequest, Result<SignInResult?, any Error>>

extension AccountRepository {
    /// Each batch runs on the pool in use when it starts (``DatabasePool``).
    static func knownSignIns(pool: DatabasePool, logger: Logger, maxRunning: Int, timeout: Duration) -> KnownSignIns? {
        signInBatcher(maxRunning: maxRunning, timeout: timeout) { try await knownSignIns($0, client: pool.client, logger: logger) }
    }

    /// One batch: per request, the sign-in when the statement applied to it, else nil (the
    /// full statement follows). A later request with the session id of an earlier one (one
    /// identity token posted twice at once) is not posted: nil, and the full statement refuses
    /// it as a replay once the first has committed.
    static func knownSignIns(_ requests: [SignInRequest], client: PostgresClient, logger: Logger) async throws -> [SignInResult?] {
        guard requests.contains(where: { $0.keptCode != nil }) else {
            return try await postedBatch(
                requests, client: client, logger: logger, statement: KnownSignInBatchStatement.init, unanswered: nil, read: readKnown,
                repeated: { _ in nil })
        }
        return try await postedBatch(
            SignInRules.codesKept(requests), client: client, logger: logger, statement: KnownCodeKeepingBatchStatement.init,
            unanswered: nil,
            read: readKnown, repeated: { _ in nil })
    }

    /// One row of either form of the known statement.
    private static func readKnown(_ reader: inout RowReader, _ posted: [SignInRequest]) throws -> (n: Int, outcome: SignInResult?) {
        let codeKept: Bool = try reader.next()
        let n = Int(try reader.next(Int32.self))
        let account = try decodeAccount(&reader)
        _ = try reader.next(Int32.self)  // n again, the identity's
        let identity = try decodeIdentity(&reader)
        guard posted.indices.contains(n) else { return (n, nil) }
        return (
            n,
            SignInResult(
                account: account, identity: identity, isNewAccount: false, sessionID: posted[n].session.id,
                codeKept: posted[n].keptCode == nil ? nil : codeKept)
        )
    }
}

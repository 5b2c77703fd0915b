import BrokerCore
import Foundation
import Logging
import PostgresNIO

extension AccountRepository {
    /// The first sign-in this process sees of an identity, as one lean statement, for one
    /// request or for several in one commit (decision 0059). It does what ``SignInStatement``
    /// does on its two common paths and nothing else:
    /// - a returning person whose sign-in brings nothing new: the session opened, exactly as
    ///   ``QuietSignInBatchStatement`` opens it (the same `quiet`, `opened` and `capped` CTEs), unless a
    ///   provider refresh token is posted;
    /// - a new person: a new identity, its new account, the session with its first refresh
    ///   token and the `account.created` event.
    ///
    /// PostgreSQL builds every node of a statement's plan each time it runs it, needed or not,
    /// and the full statement's start-up (its update of a known identity and account, the
    /// consent renewal, the link by email and its audit rows) had grown to more of its time
    /// than its work.
    ///
    /// An element not quiet is created only when nothing else could apply to it, read per
    /// element in the statement's snapshot:
    /// - no identity has its key (else `known`);
    /// - no consent revocation has its key (a new Sign in with Apple after `consent-revoked`
    ///   re-links the old account);
    /// - its session id is not taken (a replayed identity token, which the full statement
    ///   refuses);
    /// - when it may link by email, no active account of the tenant has its verified,
    ///   non-private email;
    /// - no earlier element of the batch has its email in the same tenant (the later one then
    ///   sees the first's account as the full statement would: a link or `possible_duplicate`).
    ///
    /// Anything else returns its element with no account and writes nothing for it; the caller
    /// runs ``SignInStatement`` for it. Two elements with one identity key (the same person's
    /// two tokens at once) or a first sign-in racing another statement: the identity insert's
    /// `ON CONFLICT DO NOTHING` skips the later one, which then writes nothing and takes the
    /// full statement too. Every lookup of `checked` is a subquery in a select list, which the
    /// planner never turns into a join, with `OFFSET 0`, which keeps it from being planned as
    /// a hashed subplan (one scan of the whole table, chosen while a table is small and kept
    /// for the connection's life): each reads its row by the element's key (decision 0014).
    struct FirstSignInBatchStatement: PostgresPreparedStatement {
        typealias Row = PostgresRow

        static let name = "ib_first_sign_in_batch"

        /// The posted elements, in batch order; no two with one session id.
        let requests: [SignInRequest]
        /// Per element: the new identity's id and the new account's.
        let newIDs: [(identity: UUID, account: UUID)]

        static let sql = text(keepingCodes: false)

        /// The statement; `keepingCodes`: the form a batch with a relying party's code takes
        /// (``FirstCodeKeepingBatchStatement``, decision 0100), the same with the code kept. The
        /// sessions it opens: the quiet elements' (`opened`) and the new people's (`started`).
        static func text(keepingCodes: Bool) -> String {
            let opened =
                "SELECT o.id FROM opened o UNION ALL SELECT f.session_id FROM upserted u JOIN checked f ON f.new_identity_id = u.id"
            let keeping = keepingCodes ? ",\n" + SignInRules.codeKeeping(opened: opened) : ""
            let kept = { (session: String) in keepingCodes ? SignInRules.codeKept(session: session) : "false" }
            return """
                WITH \(PostedSignIns.cte),
                \(QuietSignInBatchStatement.quietCTE),
                checked AS MATERIALIZED (
                    SELECT p.*,
                        EXISTS (SELECT 1 FROM identities i WHERE \(SignInRules.identityKey("i")) OFFSET 0) AS known,
                        EXISTS (SELECT 1 FROM consent_revocations c WHERE \(SignInRules.identityKey("c")) OFFSET 0)
                        OR EXISTS (SELECT 1 FROM sessions o WHERE o.id = p.session_id OFFSET 0)
                        OR (p.auto_link AND p.email IS NOT NULL AND EXISTS (
                            SELECT 1 FROM accounts m WHERE \(SignInRules.linkCandidate("m")) OFFSET 0))
                        OR (p.email IS NOT NULL AND EXISTS (
                            SELECT 1 FROM posted q
                            WHERE q.n < p.n AND q.tenant_id = p.tenant_id AND lower(q.email) = lower(p.email) OFFSET 0)) AS elsewhere
                    FROM posted p
                    WHERE NOT EXISTS (SELECT 1 FROM quiet q WHERE q.n = p.n)
                ),
                upserted AS (
                    \(SignInRules.identityInsert(id: "f.new_identity_id", account: "f.new_account_id", "f"))
                    FROM checked f WHERE NOT f.known AND NOT f.elsewhere
                    ON CONFLICT (tenant_id, provider, provider_scope, subject) DO NOTHING
                    RETURNING \(identityColumns)
                ),
                created AS (
                    \(SignInRules.accountInsert(tenant: "f.tenant_id"))
                    FROM upserted u JOIN checked f ON f.new_identity_id = u.id
                    RETURNING \(accountColumns)
                ),
                \(QuietSignInBatchStatement.openedCTE),
                started AS (
                    \(SignInRules.sessionInsert(account: "f.new_account_id", identity: "f.new_identity_id", "f"))
                    FROM upserted u JOIN checked f ON f.new_identity_id = u.id
                ),
                \(QuietSignInBatchStatement.cappedCTE),
                announced AS (
                    INSERT INTO events_outbox (tenant_id, account_id, event_type, payload)
                    SELECT f.tenant_id, f.new_account_id, 'account.created',
                        \(SignInRules.eventPayload(account: "f.new_account_id", identity: "f.new_identity_id", provider: "f.provider"))
                    FROM upserted u JOIN checked f ON f.new_identity_id = u.id
                )\(keeping)
                SELECT CASE WHEN q.session_id IN (SELECT o.id FROM opened o) THEN 'opened' ELSE 'replayed' END, false,
                    \(kept("q.session_id")), q.*
                FROM quiet q
                UNION ALL
                SELECT CASE WHEN u.id IS NOT NULL THEN 'created' WHEN f.known THEN 'known' ELSE 'elsewhere' END,
                    (u.id IS NOT NULL AND f.email IS NOT NULL AND EXISTS (
                        SELECT 1 FROM accounts d WHERE \(SignInRules.possibleDuplicate("d", "f")) OFFSET 0)),
                    \(kept("f.session_id")), f.n, f.session_id, u.account_id, u.id, a.*, u.*
                FROM checked f LEFT JOIN upserted u ON u.id = f.new_identity_id LEFT JOIN created a ON a.id = u.account_id
                """
        }

        init(requests: [SignInRequest], newIDs: [(identity: UUID, account: UUID)]? = nil) {
            self.requests = requests
            self.newIDs = newIDs ?? requests.map { _ in (UUID.timeOrdered(), UUID.timeOrdered()) }
        }

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 1)
            bindings.append(PostedSignIns.json(requests, newIDs: newIDs))
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
    }
}

extension AccountRepository {
    /// ``FirstSignInBatchStatement`` keeping the relying parties' codes its elements post, in
    /// its commit (decision 0100): a batch with one runs it.
    struct FirstCodeKeepingBatchStatement: PostgresPreparedStatement {
        typealias Row = PostgresRow

        static let name = "ib_first_sign_in_code_batch"
        static let sql = FirstSignInBatchStatement.text(keepingCodes: true)

        let statement: FirstSignInBatchStatement

        init(requests: [SignInRequest]) { statement = FirstSignInBatchStatement(requests: requests) }

        func makeBindings() throws -> PostgresBindings { try statement.makeBindings() }

        func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
    }
}

/// What a sign-in this process had not seen found: the account it created (a new person) or
/// the session it opened quietly (a returning one), each with its session; an identity that
/// exists but whose sign-in is not quiet, or anything else the full statement handles (both
/// go on to it); or a session id that is taken (a replayed identity token).
enum FirstSignInOutcome: Sendable {
    case created(SignInResult)
    case opened(SignInResult)
    case known
    case elsewhere
    case replayed
}

typealias FirstSignIns = StatementBatcher<SignInRequest, Result<FirstSignInOutcome, any Error>>

extension AccountRepository {
    /// Each batch runs on the pool in use when it starts (``DatabasePool``).
    static func firstSignIns(pool: DatabasePool, logger: Logger, maxRunning: Int, timeout: Duration) -> FirstSignIns? {
        signInBatcher(maxRunning: maxRunning, timeout: timeout) { try await firstSignIns($0, client: pool.client, logger: logger) }
    }

    /// One batch: the first request of each session id goes to the statement; a later one with
    /// the same id (one identity token posted twice at once) is a replay when the first opened
    /// its session, else the full statement's.
    static func firstSignIns(_ requests: [SignInRequest], client: PostgresClient, logger: Logger) async throws
        -> [FirstSignInOutcome]
    {
        let repeated = { (first: FirstSignInOutcome) -> FirstSignInOutcome in
            switch first {
            case .created, .opened: return .replayed
            default: return .elsewhere
            }
        }
        guard requests.contains(where: { $0.keptCode != nil }) else {
            return try await postedBatch(
                requests, client: client, logger: logger, statement: { FirstSignInBatchStatement(requests: $0) },
                unanswered: .elsewhere, read: readFirst, repeated: repeated)
        }
        return try await postedBatch(
            SignInRules.codesKept(requests), client: client, logger: logger, statement: { FirstCodeKeepingBatchStatement(requests: $0) },
            unanswered: .elsewhere, read: readFirst, repeated: repeated)
    }

    /// One row of either form of the first-sign-in statement.
    private static func readFirst(_ reader: inout RowReader, _ posted: [SignInRequest]) throws -> (n: Int, outcome: FirstSignInOutcome) {
        let outcome: String = try reader.next()
        let possibleDuplicate: Bool = try reader.next()
        let codeKept: Bool = try reader.next()
        let n = Int(try reader.next(Int32.self))
        _ = try reader.next(UUID.self)  // session id
        _ = try reader.next(UUID?.self)  // account id
        guard try reader.next(UUID?.self) != nil else {  // identity id
            return (n, outcome == "known" ? .known : .elsewhere)
        }
        let account = try decodeAccount(&reader)
        let identity = try decodeIdentity(&reader)
        guard posted.indices.contains(n) else { return (n, .elsewhere) }
        let sessionID = posted[n].session.id
        let kept = posted[n].keptCode == nil ? nil : codeKept
        switch outcome {
        case "created":
            return (
                n,
                .created(
                    SignInResult(
                        account: account, identity: identity, isNewAccount: true, sessionID: sessionID,
                        possibleDuplicate: possibleDuplicate, codeKept: kept))
            )
        case "opened":
            return (
                n,
                .opened(
                    SignInResult(account: account, identity: identity, isNewAccount: false, sessionID: sessionID, codeKept: kept))
            )
        default: return (n, .replayed)
        }
    }
}

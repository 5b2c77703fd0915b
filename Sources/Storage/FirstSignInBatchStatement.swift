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

        static let sql = """
            WITH posted AS MATERIALIZED (
                SELECT * FROM json_to_recordset($1::text::json) AS p(n int, t uuid, p text, s text, u text, e text,
                    ev bool, pe bool, gn text, fn text, r int8, a text, id uuid, c text, pf text, x int8, h text, hx int8, k int,
                    rt text, al bool, ii uuid, ai uuid)
            ),
            \(QuietSignInBatchStatement.quietCTE("p.rt IS NULL")),
            checked AS MATERIALIZED (
                SELECT p.*,
                    EXISTS (
                        SELECT 1 FROM identities i
                        WHERE i.tenant_id = p.t AND i.provider = p.p AND i.provider_scope = p.s AND i.subject = p.u OFFSET 0) AS known,
                    EXISTS (
                        SELECT 1 FROM consent_revocations c
                        WHERE c.tenant_id = p.t AND c.provider = p.p AND c.provider_scope = p.s AND c.subject = p.u OFFSET 0)
                    OR EXISTS (SELECT 1 FROM sessions o WHERE o.id = p.id OFFSET 0)
                    OR (p.al AND p.e IS NOT NULL AND EXISTS (
                        SELECT 1 FROM accounts m
                        WHERE m.tenant_id = p.t AND m.email_key = lower(p.e) AND m.email IS NOT NULL
                            AND m.email_verified AND NOT m.is_private_email AND m.status = 'active' OFFSET 0))
                    OR (p.e IS NOT NULL AND EXISTS (
                        SELECT 1 FROM posted q WHERE q.n < p.n AND q.t = p.t AND lower(q.e) = lower(p.e) OFFSET 0)) AS elsewhere
                FROM posted p
                WHERE NOT EXISTS (SELECT 1 FROM quiet q WHERE q.n = p.n)
            ),
            upserted AS (
                INSERT INTO identities AS i (id, tenant_id, account_id, provider, provider_scope, subject, email,
                    email_verified, is_private_email, given_name, family_name, real_user_status,
                    provider_refresh_token_sealed, provider_token_client_id, attributes, last_sign_in_at)
                SELECT f.ii, f.t, f.ai, f.p, f.s, f.u, f.e, f.ev, f.pe, f.gn, f.fn, f.r, decode(f.rt, 'hex'),
                    CASE WHEN f.rt IS NULL THEN NULL ELSE f.c END, f.a::jsonb, now()
                FROM checked f WHERE NOT f.known AND NOT f.elsewhere
                ON CONFLICT (tenant_id, provider, provider_scope, subject) DO NOTHING
                RETURNING \(identityColumns)
            ),
            created AS (
                INSERT INTO accounts AS a (id, tenant_id, given_name, family_name, display_name, email, email_verified,
                    is_private_email, last_seen_at)
                SELECT f.ai, f.t, f.gn, f.fn, nullif(trim(concat_ws(' ', f.gn, f.fn)), ''), f.e, f.ev, f.pe, now()
                FROM upserted u JOIN checked f ON f.ii = u.id
                RETURNING \(accountColumns)
            ),
            \(QuietSignInBatchStatement.openedCTE),
            started AS (
                INSERT INTO sessions (id, tenant_id, account_id, identity_id, client_id, platform, idp, expires_at,
                    refresh_token_hash, refresh_token_expires_at)
                SELECT f.id, f.t, f.ai, f.ii, f.c, f.pf, f.p,
                    to_timestamp(f.x::float8 / 1000000), decode(f.h, 'hex'), to_timestamp(f.hx::float8 / 1000000)
                FROM upserted u JOIN checked f ON f.ii = u.id
            ),
            \(QuietSignInBatchStatement.cappedCTE),
            announced AS (
                INSERT INTO events_outbox (tenant_id, account_id, event_type, payload)
                SELECT f.t, f.ai, 'account.created', jsonb_build_object('account_id', f.ai, 'identity_id', f.ii, 'provider', f.p)
                FROM upserted u JOIN checked f ON f.ii = u.id
            )
            SELECT CASE WHEN q.session_id IN (SELECT o.id FROM opened o) THEN 'opened' ELSE 'replayed' END, false, q.*
            FROM quiet q
            UNION ALL
            SELECT CASE WHEN u.id IS NOT NULL THEN 'created' WHEN f.known THEN 'known' ELSE 'elsewhere' END,
                (u.id IS NOT NULL AND f.e IS NOT NULL AND EXISTS (
                    SELECT 1 FROM accounts d
                    WHERE d.tenant_id = f.t AND d.email_key = lower(f.e) AND d.email IS NOT NULL AND d.status <> 'deleted' OFFSET 0)),
                f.n, f.id, u.account_id, u.id, a.*, u.*
            FROM checked f LEFT JOIN upserted u ON u.id = f.ii LEFT JOIN created a ON a.id = u.account_id
            """

        init(requests: [SignInRequest], newIDs: [(identity: UUID, account: UUID)]? = nil) {
            self.requests = requests
            self.newIDs = newIDs ?? requests.map { _ in (UUID.timeOrdered(), UUID.timeOrdered()) }
        }

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 1)
            bindings.append(json())
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }

        /// The batch as the quiet statement's elements (``QuietSignInBatchStatement/writeElement(_:_:to:)``)
        /// with the provider refresh token sealed for storage (`rt`, hex), whether the element
        /// may link by email (`al`), and the new identity's and account's ids (`ii`, `ai`).
        func json() -> String {
            var writer = JSONWriter(capacity: 640 * requests.count)
            writer.beginArray()
            for (n, request) in requests.enumerated() {
                writer.beginObject()
                QuietSignInBatchStatement.writeElement(n, request, to: &writer)
                writer.member("rt", request.sealedProviderRefreshToken.map { Hex.encode($0) })
                writer.member("al", request.autoLinkByEmail)
                writer.member("ii", newIDs[n].identity.lowercasedString)
                writer.member("ai", newIDs[n].account.lowercasedString)
                writer.endObject()
            }
            writer.endArray()
            return String(decoding: writer.bytes, as: UTF8.self)
        }
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
        let (posted, postedIndex) = firstOfEachSession(requests)
        var outcomes = [FirstSignInOutcome](repeating: .elsewhere, count: posted.count)
        let rows = try await client.rows(FirstSignInBatchStatement(requests: posted), logger: logger)
        for row in rows {
            var reader = RowReader(row)
            let outcome: String = try reader.next()
            let possibleDuplicate: Bool = try reader.next()
            let n = Int(try reader.next(Int32.self))
            guard outcomes.indices.contains(n) else { throw BatchMismatch() }
            _ = try reader.next(UUID.self)  // session id
            _ = try reader.next(UUID?.self)  // account id
            guard try reader.next(UUID?.self) != nil else {  // identity id
                outcomes[n] = outcome == "known" ? .known : .elsewhere
                continue
            }
            let account = try decodeAccount(&reader)
            let identity = try decodeIdentity(&reader)
            let sessionID = posted[n].session.id
            switch outcome {
            case "created":
                outcomes[n] = .created(
                    SignInResult(account: account, identity: identity, isNewAccount: true, sessionID: sessionID, possibleDuplicate: possibleDuplicate))
            case "opened":
                outcomes[n] = .opened(SignInResult(account: account, identity: identity, isNewAccount: false, sessionID: sessionID))
            default:
                outcomes[n] = .replayed
            }
        }
        return postedIndex.map { index in
            guard index < 0 else { return outcomes[index] }
            switch outcomes[-1 - index] {
            case .created, .opened: return .replayed
            default: return .elsewhere
            }
        }
    }
}

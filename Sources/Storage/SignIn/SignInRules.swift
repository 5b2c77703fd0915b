import BrokerCore

/// The rules of a sign-in, each written once, as the SQL fragments every sign-in statement is
/// made of (``AccountRepository/SignInStatement`` and the lean batches). Values a sign-in
/// brings are read from its posted element (`p` unless a fragment is told another alias,
/// ``PostedSignIns``); the `INSERT` and `SET` lists come from ``SignInColumns``.
enum SignInRules {
    // MARK: Finding

    /// The row `row` (an identity or a consent revocation) has the key of the element `p`.
    static func identityKey(_ row: String, _ p: String = "p") -> String {
        "\(row).tenant_id = \(p).tenant_id AND \(row).provider = \(p).provider AND \(row).provider_scope = \(p).provider_scope"
            + " AND \(row).subject = \(p).subject"
    }

    /// The stored identity `i` already holds everything the element `p` brings: a sign-in
    /// for it writes no identity or account row, only its session (decision 0013).
    static func quiet(_ i: String = "i", _ p: String = "p") -> String {
        let identity = SignInColumns.identity.map(\.written)
        return identity.compactMap { column -> String? in
            let brought = column.value(p)
            switch column.rule {
            case .follows: return nil
            case .replaceAlwaysNew: return "\(brought) IS NULL"
            case .fillWhenEmpty: return "(\(brought) IS NULL OR \(i).\(column.name) IS NOT NULL)"
            case .merge: return "(\(brought) IS NULL OR \(i).\(column.name) @> \(brought))"
            case .replaceWhenBrought:
                let equal = ([column] + identity.filter { $0.rule == .follows(column.name) }).map { c in
                    "\(i).\(c.name) = \(c.value(p))"
                }
                return "(\(brought) IS NULL OR (\(equal.joined(separator: " AND "))))"
            }
        }.joined(separator: "\n    AND ")
    }

    /// An active account of the element's tenant, `m`, that a new identity of `p` may join by
    /// its verified, non-private email (the tenant's `auto_link_verified_email`). One such
    /// account links; two or more, none.
    static func linkCandidate(_ m: String, _ p: String = "p") -> String {
        """
        \(m).tenant_id = \(p).tenant_id AND \(m).email_key = lower(\(p).email) AND \(m).email IS NOT NULL
            AND \(m).email_verified AND NOT \(m).is_private_email AND \(m).status = 'active'
        """
    }

    /// An account `d` of the tenant, not deleted, with the email of `p`: a new account with
    /// that email is a `possible_duplicate`.
    static func possibleDuplicate(_ d: String, _ p: String = "p") -> String {
        "\(d).tenant_id = \(p).tenant_id AND \(d).email_key = lower(\(p).email) AND \(d).email IS NOT NULL AND \(d).status <> 'deleted'"
    }

    // MARK: Writing

    /// `INSERT … SELECT` of a new identity of element `p` (its columns from
    /// ``SignInColumns/identity``) with the id `id` in the account `account`; the caller adds
    /// `FROM`, and `ON CONFLICT` where it races.
    static func identityInsert(id: String, account: String, _ p: String = "p") -> String {
        let written = SignInColumns.identity.map(\.written)
        let values = written.map { $0.value(p) }
        return """
            INSERT INTO identities AS i (id, tenant_id, account_id, provider, provider_scope, subject,
                \(written.map(\.name).joined(separator: ", ")), last_sign_in_at)
            SELECT \(id), \(p).tenant_id, \(account), \(p).provider, \(p).provider_scope, \(p).subject,
                \(values.joined(separator: ", ")), now()
            """
    }

    /// What the element `p` brings for its identity as a row of identity columns (the
    /// `excluded` row of an `UPDATE` that is not an upsert).
    static func broughtIdentity(_ p: String = "p") -> String {
        SignInColumns.identity.map(\.written).map { "\($0.value(p)) AS \($0.name)" }
            .joined(separator: ", ")
    }

    /// What a sign-in writes on its stored identity `i` from what it brings (`EXCLUDED`), by
    /// each column's rule, and its stamps.
    static let identityUpdate: String =
        setList(SignInColumns.identity.map(\.written), old: "i", new: { "EXCLUDED.\($0.name)" })
        + ",\nlast_sign_in_at = now(), updated_at = now()"

    /// What a sign-in writes on the account `a` of its identity `u`, by each column's rule:
    /// the identity's email, names and display name where the account has none; active, seen now.
    static let accountUpdate: String =
        setList(SignInColumns.account, old: "a", new: { $0.value("u") })
        + ",\nstatus = 'active', disabled_reason = NULL, last_seen_at = now(), updated_at = now()"

    /// `INSERT … SELECT` of the new account of the identity `u` (its id `u.account_id`) in the
    /// tenant `tenant`; the caller adds `FROM`.
    static func accountInsert(tenant: String) -> String {
        """
        INSERT INTO accounts AS a (id, tenant_id, \(SignInColumns.account.map(\.name).joined(separator: ", ")), last_seen_at)
        SELECT u.account_id, \(tenant), \(SignInColumns.account.map { $0.value("u") }.joined(separator: ", ")), now()
        """
    }

    /// `INSERT … SELECT` of the session of element `p` for `account` and `identity`, with its
    /// first refresh token; the caller adds `FROM`.
    static func sessionInsert(account: String, identity: String, _ p: String = "p") -> String {
        let columns = SignInColumns.session
        return """
            INSERT INTO sessions (account_id, identity_id, \(columns.map(\.name).joined(separator: ", ")))
            SELECT \(account), \(identity), \(columns.map { "\(p).\($0.member)" }.joined(separator: ", "))
            """
    }

    /// The session cap (decision 0051): `elements` joins the elements that may have opened a
    /// session with `posted p` (for `p.tenant_id` and the cap `p.max_open_sessions`), `opened`
    /// limits them to those that did, and `account` is the account id of each. A statement
    /// does not see its own new sessions, so the newest `k - 1` others stay open. The exact,
    /// sorted read of an account's open sessions runs only when it has at least `k` sessions
    /// of any state (an index-only probe).
    static func sessionCap(elements: String, opened: String, account: String) -> String {
        """
        capped AS (
            UPDATE sessions s SET revoked_at = now(), revoke_reason = 'session_limit'
            WHERE EXISTS (
                    SELECT 1 FROM \(elements)
                    WHERE EXISTS (SELECT 1 FROM sessions c WHERE c.account_id = \(account) OFFSET p.max_open_sessions - 1 LIMIT 1))
                AND s.tenant_id = ANY(ARRAY(SELECT p.tenant_id FROM posted p)) AND s.revoked_at IS NULL AND s.id = ANY(ARRAY(
                SELECT x.id FROM \(elements)\(opened)
                CROSS JOIN LATERAL (
                    SELECT o.id FROM sessions o
                    WHERE o.tenant_id = p.tenant_id AND o.account_id = \(account) AND o.revoked_at IS NULL AND o.expires_at > now()
                    ORDER BY o.created_at DESC, o.id DESC OFFSET p.max_open_sessions - 1) x))
        )
        """
    }

    // MARK: A relying party's code

    /// How many relying parties' codes one statement keeps: a batch posts the codes of its first
    /// this many elements that carry one, and the others keep theirs on their own after it. Each
    /// is one more `UPDATE` the statement's plan starts every time it runs (decision 0100).
    static let codesKeptPerStatement = 8

    /// The CTEs of a statement that keeps relying parties' codes (decision 0100): `coded`, the
    /// elements that post one and whose session the statement opened (`opened`: a query of the
    /// session ids it opened), numbered; `code_state_1` to `code_state_8`, the web sign-in state of
    /// each answered with its code when it may still be (``WebSignInRepository/TakeFragments``,
    /// the rule the code kept on its own follows), in the element's tenant; and `kept_codes`, the
    /// codes kept under their hashes naming the sessions, all in the statement's commit. Each
    /// state is updated by an `UPDATE` of its own whose key equals one value, as
    /// `TakeStateStatement` reads it: a generic plan reads a key equal to one value through its
    /// index even on a table never analyzed, while `state_hash = ANY(...)` (an array PostgreSQL
    /// takes for ten values) was planned as a sequential scan of `web_sign_in_states` once the
    /// table had been analyzed small, and kept for the connection's life (587 buffers a batch in
    /// `code-flow.sh`, 2026-12-05).
    static func codeKeeping(opened: String) -> String {
        typealias Take = WebSignInRepository.TakeFragments
        let states = (1...codesKeptPerStatement).map { k in
            """
            code_state_\(k) AS (
                UPDATE web_sign_in_states s SET \(Take.answered)
                WHERE s.state_hash = (SELECT c.code_state_hash FROM coded c WHERE c.k = \(k))
                    AND s.tenant_id = (SELECT c.tenant_id FROM coded c WHERE c.k = \(k))
                    AND \(Take.answerable("s", now: "(SELECT c.code_now FROM coded c WHERE c.k = \(k))"))
                RETURNING s.state_hash, s.tenant_id, s.provider, s.oauth_client_id
            ),
            """
        }
        let union = (1...codesKeptPerStatement).map { "SELECT * FROM code_state_\($0)" }.joined(separator: " UNION ALL ")
        return """
            coded AS MATERIALIZED (
                SELECT row_number() OVER (ORDER BY p.n) AS k, p.n, p.tenant_id, p.session_id, p.code_state_hash, p.code_hash,
                    p.code_grant_sealed, p.code_expires_at, p.code_now
                FROM posted p WHERE p.code_state_hash IS NOT NULL AND p.session_id IN (\(opened))
            ),
            \(states.joined(separator: "\n"))
            kept_codes AS (
                INSERT INTO web_sign_in_codes (\(Take.codeColumns))
                SELECT c.code_hash, t.tenant_id, t.provider, c.code_grant_sealed, c.code_expires_at, t.oauth_client_id, c.session_id
                FROM (\(union)) t JOIN coded c ON c.code_state_hash = t.state_hash AND c.tenant_id = t.tenant_id
                ON CONFLICT (code_hash) DO NOTHING
                RETURNING session_id
            )
            """
    }

    /// The requests of a batch as a code-keeping statement posts them: the codes of the first
    /// ``codesKeptPerStatement`` that carry one, none for the others (their sign-ins answer
    /// nothing of a code, and their callers keep it on their own).
    static func codesKept(_ requests: [SignInRequest]) -> [SignInRequest] {
        var posted = 0
        return requests.map { request in
            guard request.keptCode != nil else { return request }
            posted += 1
            var request = request
            if posted > codesKeptPerStatement { request.keptCode = nil }
            return request
        }
    }

    /// Whether the element whose session id is `session` had its code kept (``codeKeeping(opened:)``).
    static func codeKept(session: String) -> String {
        "(\(session) IN (SELECT k.session_id FROM kept_codes k))"
    }

    /// The payload of `account.created` and `identity.linked` (the latter adds `linked_by`).
    static func eventPayload(account: String, identity: String, provider: String) -> String {
        "jsonb_build_object('account_id', \(account), 'identity_id', \(identity), 'provider', \(provider))"
    }

    /// A `SET` list by the columns' rules: `old` is the stored row's alias, `new` a column's
    /// brought value.
    private static func setList(_ columns: [SignInColumns.Written], old: String, new: (SignInColumns.Written) -> String) -> String {
        columns.map { column in
            let stored = "\(old).\(column.name)", brought = new(column)
            switch column.rule {
            case .replaceWhenBrought, .replaceAlwaysNew: return "\(column.name) = coalesce(\(brought), \(stored))"
            case .fillWhenEmpty: return "\(column.name) = coalesce(\(stored), \(brought))"
            case .merge:
                return
                    "\(column.name) = CASE WHEN \(brought) IS NULL THEN \(stored) ELSE coalesce(\(stored), '{}'::jsonb) || \(brought) END"
            case .follows(let leader):
                let leaderBrought = columns.first { $0.name == leader }.map(new) ?? "NULL"
                return "\(column.name) = CASE WHEN \(leaderBrought) IS NULL THEN \(stored) ELSE \(brought) END"
            }
        }.joined(separator: ",\n")
    }
}

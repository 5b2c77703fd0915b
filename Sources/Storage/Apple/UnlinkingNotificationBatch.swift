import BrokerCore
import Foundation
import Logging
import PostgresNIO

/// Apple's notifications that unlink an identity (`consent-revoked`, `account-delete`), each
/// type one prepared statement for every notification of it that arrives together (decisions
/// 0052 and 0058).
///
/// Such a statement reads its one snapshot throughout: the identities an account has left are
/// counted as its others, since the deletion is not visible to the statement that makes it. So
/// it takes at most one element per account; another element whose identity belongs to an
/// account already taken is left out (no receipt, nothing written) and goes in the next
/// statement. Its rows say, per element `n`: taken, received (its `jti` new) and applied (its
/// identity found).
protocol UnlinkingNotificationStatement: PostgresPreparedStatement where Row == PostgresRow {
    init(elements: [AppleNotificationElement])
    /// The elements, in arrival order; no two with one receipt key and no two for one identity
    /// (``AppleNotificationElement/rounds(_:)``).
    var elements: [AppleNotificationElement] { get }
}

/// What an unlinking statement did with an element: left it for the next statement (another
/// element of its account went first), or its outcome.
enum UnlinkingResult: Equatable {
    case deferred
    case done(AppleNotificationRepository.Outcome)
}

extension UnlinkingNotificationStatement {
    func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }

    /// `[{"n": 0, "t": tenant, "j": jti, …}, …]`, the statement's `$1`.
    var json: String {
        var writer = JSONWriter(capacity: 256 * elements.count)
        writer.beginArray()
        for (n, element) in elements.enumerated() {
            writer.beginObject()
            element.writeCommonMembers(n, into: &writer)
            writer.endObject()
        }
        writer.endArray()
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    /// The statement's rows, one per element, in the elements' order.
    func results(_ rows: [PostgresRow]) throws -> [UnlinkingResult] {
        guard rows.count == elements.count else { throw BatchMismatch() }
        var results = [UnlinkingResult](repeating: .deferred, count: elements.count)
        for row in rows {
            let (n, taken, received, applied) = try row.decode((Int32, Bool, Bool, Bool).self)
            guard results.indices.contains(Int(n)) else { throw BatchMismatch() }
            results[Int(n)] = !taken ? .deferred : !received ? .done(.duplicate) : .done(applied ? .applied : .unknownSubject)
        }
        return results
    }

    /// Runs on `connection` (a scoped statement's, or a transaction's) and returns each
    /// element's result.
    func run(on connection: PostgresConnection, logger: Logger) async throws -> [UnlinkingResult] {
        var rows: [PostgresRow] = []
        for try await row in try await connection.execute(self, logger: logger) { rows.append(row) }
        return try results(rows)
    }

    /// Each batch runs on the pool in use when it starts; nil when batching is off.
    static func batcher(pool: DatabasePool, logger: Logger, maxRunning: Int, timeout: Duration) -> UnlinkingNotificationBatch? {
        AppleNotificationElement.batcher(
            pool: pool, logger: logger, maxRunning: maxRunning, timeout: timeout, label: Self.name, write: write)
    }

    /// Writes `elements` in as few statements as their keys and accounts allow, in arrival
    /// order: each round as one statement, then again what it left for the next (each time the
    /// first element of every account), before the next round.
    static func write(_ elements: [AppleNotificationElement], client: PostgresClient, logger: Logger) async throws
        -> [AppleNotificationRepository.Outcome]
    {
        var outcomes = [AppleNotificationRepository.Outcome](repeating: .duplicate, count: elements.count)
        for round in AppleNotificationElement.rounds(elements) {
            var pending = round
            while !pending.isEmpty {
                let statement = Self(elements: pending.map { elements[$0] })
                let results = try await client.withScopedStatement(writes: true, logger: logger) { connection in
                    try await statement.run(on: connection, logger: logger)
                }
                var next: [Int] = []
                for (index, result) in zip(pending, results) {
                    switch result {
                    case .deferred: next.append(index)
                    case .done(let outcome): outcomes[index] = outcome
                    }
                }
                // Each statement takes the first element of every account it meets.
                guard next.count < pending.count else { throw BatchMismatch() }
                pending = next
            }
        }
        return outcomes
    }
}

extension UnlinkingNotificationStatement {
    /// The CTEs every unlinking statement starts with (its `$1` the elements, its `$2` the
    /// receipt's event type): `posted`, `found` (each identity by its unique key, locked),
    /// `taken` (the first element of each account, and those whose identity is unknown),
    /// `receipt` and `received` (the `jti`s new to the tenant), `target` (the taken, received
    /// elements with an identity), `account` (their accounts, locked in id order) and
    /// `remaining` (each account's other identities, reached by the account: the locked account
    /// row is their tenant check, an identity's composite foreign key putting it in its
    /// account's tenant). Every row is reached by its key (decision 0014; `HotStatementPlanTests`).
    /// `pr` is the provider as a column, so that a lookup of a key holding it joins on every
    /// column of the key rather than scanning for the constant.
    static var unlinkingHead: String {
        """
        WITH posted AS MATERIALIZED (
            SELECT * FROM json_to_recordset($1::text::json) AS p(n int, t uuid, j text, et int8, etx text, sc text, u text)
        ),
        found AS MATERIALIZED (
            SELECT p.n, i.id, i.account_id FROM posted p
            CROSS JOIN LATERAL (
                SELECT id, account_id FROM identities
                WHERE tenant_id = p.t AND provider = 'apple' AND provider_scope = p.sc AND subject = p.u
                LIMIT 1
                FOR UPDATE) i
        ),
        taken AS MATERIALIZED (
            SELECT p.*, 'apple'::text AS pr, f.id AS identity_id, f.account_id FROM posted p LEFT JOIN found f ON f.n = p.n
            WHERE f.n IS NULL OR f.n = (SELECT min(o.n) FROM found o WHERE o.account_id = f.account_id)
        ),
        receipt AS (
            INSERT INTO notification_receipts (tenant_id, jti, event_type, event_time, outcome)
            SELECT k.t, k.j, $2::text, to_timestamp(k.et::float8 / 1000000),
                CASE WHEN k.identity_id IS NULL THEN 'unknown_subject' ELSE 'applied' END
            FROM taken k
            ORDER BY k.n
            ON CONFLICT (tenant_id, jti) DO NOTHING
            RETURNING tenant_id, jti
        ),
        received AS MATERIALIZED (
            SELECT k.* FROM taken k JOIN receipt r ON r.tenant_id = k.t AND r.jti = k.j
        ),
        target AS MATERIALIZED (SELECT r.* FROM received r WHERE r.identity_id IS NOT NULL),
        account AS MATERIALIZED (
            SELECT a.id, a.status FROM accounts a JOIN target x ON a.tenant_id = x.t AND a.id = x.account_id
            ORDER BY a.id
            FOR UPDATE OF a
        ),
        remaining AS MATERIALIZED (
            SELECT x.n, count(r.id)::int8 AS left_over FROM target x JOIN account c ON c.id = x.account_id
            LEFT JOIN identities r ON r.account_id = c.id AND r.id <> x.identity_id
            GROUP BY x.n
        ),
        """
    }

    /// The rows every unlinking statement ends with: per element `n`, taken, received, applied.
    static var unlinkingResults: String {
        """
        SELECT p.n, EXISTS (SELECT 1 FROM taken k WHERE k.n = p.n), EXISTS (SELECT 1 FROM received r WHERE r.n = p.n),
            EXISTS (SELECT 1 FROM target x WHERE x.n = p.n)
        FROM posted p
        """
    }
}

typealias UnlinkingNotificationBatch = AppleNotificationElement.Batch

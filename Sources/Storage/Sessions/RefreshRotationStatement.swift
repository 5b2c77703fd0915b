import BrokerCore
import Foundation
import Logging
import PostgresNIO

extension SessionRepository {
    /// One refresh token to rotate in a batch: what ``Rotation`` carries and the session the
    /// token names.
    struct PostedRotation: Sendable {
        let rotation: Rotation
        let sessionID: UUID
    }

    /// The rotation of refresh tokens, for one or for several in one commit (decision 0074):
    /// each presented token's session is replaced its live token by the successor, and the
    /// spent token goes into the ledger, in one statement. The tokens travel as one JSON array
    /// (one parameter whatever the batch's size: one prepared statement, one generic plan).
    /// `presented` reads the token being spent before the update replaces it (PostgreSQL 15 has
    /// no `RETURNING old.…`), each element's session by a key bound to the element's values in a
    /// LATERAL subquery with `LIMIT 1` (decision 0014); a concurrent rotation that wins the row
    /// lock makes this one's update match nothing, so it records nothing either, and its element
    /// returns no row. The caller posts no two elements of one session.
    enum RotationSQL {
        /// The posted tokens, `posted p`.
        static let posted = """
            posted AS MATERIALIZED (
                SELECT r.n, r.tenant_id, r.session_id, decode(r.token_hash, 'hex') AS token_hash,
                    decode(r.successor_hash, 'hex') AS successor_hash, r.spent_id, r.idle_microseconds
                FROM json_to_recordset($1::text::json) AS r(n int, tenant_id uuid, session_id uuid, token_hash text,
                    successor_hash text, spent_id uuid, idle_microseconds int8)
            )
            """

        /// The rotation, the presented token's session found by `presentedSession` (a condition
        /// on `sessions s` and the element `p`).
        static func statement(presentedSession: String) -> String {
            """
            WITH \(posted),
            presented AS MATERIALIZED (
                SELECT p.n, s.id, s.account_id, s.issued_at, s.refresh_token_expires_at
                FROM posted p
                CROSS JOIN LATERAL (
                    SELECT s.id, s.account_id, coalesce(s.last_refreshed_at, s.created_at) AS issued_at, s.refresh_token_expires_at
                    FROM sessions s
                    WHERE \(presentedSession)
                    LIMIT 1) s
                -- Only a session of an active account rotates: a session opened in a race with its
                -- account's disabling escapes that revocation, never this check.
                CROSS JOIN LATERAL (
                    SELECT 1 FROM accounts a
                    WHERE a.tenant_id = p.tenant_id AND a.id = s.account_id AND a.status = 'active'
                    LIMIT 1) a
            ),
            rotated AS (
                UPDATE sessions s SET refresh_token_hash = p.successor_hash,
                    refresh_token_expires_at = least(now() + make_interval(secs => p.idle_microseconds::float8 / 1000000), s.expires_at),
                    last_refreshed_at = now()
                FROM presented pr JOIN posted p ON p.n = pr.n
                -- `= ANY(ARRAY(…))`: the sessions by primary key whatever the statistics say of the
                -- join (decision 0014).
                WHERE s.id = ANY(ARRAY(SELECT x.id FROM presented x)) AND s.id = pr.id
                    AND s.tenant_id = p.tenant_id AND s.refresh_token_hash = p.token_hash
                    AND s.refresh_token_expires_at > now() AND s.revoked_at IS NULL AND s.expires_at > now()
                RETURNING pr.n, \(SessionRepository.sessionColumns)
            ),
            spent AS (
                INSERT INTO refresh_tokens (id, tenant_id, session_id, token_hash, created_at, expires_at, used_at)
                SELECT p.spent_id, p.tenant_id, r.id, p.token_hash, pr.issued_at, pr.refresh_token_expires_at, now()
                FROM rotated r JOIN posted p ON p.n = r.n JOIN presented pr ON pr.n = r.n
            )
            SELECT r.* FROM rotated r
            """
        }

        /// The elements as the statement's parameter: `[{"n": 0, "tenant_id": …}, …]`.
        /// A token issued before tokens named their session has no session id (nil).
        static func json(_ rotations: [(rotation: Rotation, sessionID: UUID?)]) -> String {
            var writer = JSONWriter(capacity: 320 * rotations.count)
            writer.beginArray()
            for (n, (rotation, sessionID)) in rotations.enumerated() {
                writer.beginObject()
                writer.member("n", n)
                writer.member("tenant_id", rotation.tenantID.lowercasedString)
                writer.member("session_id", sessionID?.lowercasedString)
                writer.member("token_hash", Hex.encode(rotation.tokenHash))
                writer.member("successor_hash", Hex.encode(rotation.successorHash))
                writer.member("spent_id", rotation.spentID.lowercasedString)
                writer.member("idle_microseconds", Int((rotation.idleLifetime * 1_000_000).rounded(.towardZero)))
                writer.endObject()
            }
            writer.endArray()
            return String(decoding: writer.bytes, as: UTF8.self)
        }

        /// The session an element's row names, and the element (`n`).
        static func read(_ row: PostgresRow) throws -> (n: Int, session: SessionInfo) {
            var reader = RowReader(row)
            let n = Int(try reader.next(Int32.self))
            return (n, try decodeSession(&reader))
        }
    }

    /// The rotation of tokens that name their session (every token issued since migration
    /// 0010), alone or in a batch (``RefreshRotations``).
    struct RotateStatement: PostgresPreparedStatement {
        typealias Row = PostgresRow
        static let name = "ib_rotate_refresh_tokens"
        let rotations: [PostedRotation]
        static let sql = RotationSQL.statement(
            presentedSession: "s.id = p.session_id AND s.refresh_token_hash = p.token_hash AND s.tenant_id = p.tenant_id")
        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 1)
            bindings.append(RotationSQL.json(rotations.map { ($0.rotation, $0.sessionID) }))
            return bindings
        }
        func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
    }

    /// The rotation of a token issued before tokens named their session, one at a time: found
    /// by its hash through the partial index over the sessions that still hold such a token
    /// (migration 0010), keyed by the stored copy of the hash that only those sessions hold
    /// (`legacy_refresh_token_hash`, migration 0036: no index names the column a rotation
    /// writes, decision 0095).
    struct LegacyRotateStatement: PostgresPreparedStatement {
        typealias Row = PostgresRow
        static let name = "ib_rotate_legacy_refresh_token"
        let rotation: Rotation
        static let sql = RotationSQL.statement(
            presentedSession: "s.legacy_refresh_token_hash = p.token_hash AND s.refresh_token_legacy AND s.tenant_id = p.tenant_id")
        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 1)
            bindings.append(RotationSQL.json([(rotation, nil)]))
            return bindings
        }
        func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
    }
}

/// Refresh-token rotations written in batches (decision 0074): each caller's rotation, or nil
/// when its token rotated nothing.
typealias RefreshRotations = StatementBatcher<SessionRepository.PostedRotation, Result<SessionRepository.SessionInfo?, any Error>>

extension SessionRepository {
    /// A batcher of rotations (``BatchElements/batcher(maxRunning:timeout:tenant:because:key:_:)``),
    /// each batch on the pool in use when it starts (``DatabasePool``), in session-id order.
    static func rotations(pool: DatabasePool, logger: Logger, maxRunning: Int, timeout: Duration) -> RefreshRotations? {
        BatchElements.batcher(
            maxRunning: maxRunning, timeout: timeout, tenant: \.rotation.tenantID, because: "a batch carries several tenants' refreshes",
            key: { withUnsafeBytes(of: $0.sessionID.uuid) { Array($0) } }
        ) { try await rotate($0, client: pool.client, logger: logger) }
    }

    /// One batch: the first rotation of each session is posted; a later one of the same session
    /// (two refreshes of one session at once) rotates nothing, as when it loses the session's row
    /// lock to the first: its caller then finds the repeat or the reuse.
    static func rotate(_ rotations: [PostedRotation], client: PostgresClient, logger: Logger) async throws -> [SessionInfo?] {
        var posted: [PostedRotation] = []
        var index: [Int?] = []
        var sessions = Set<UUID>()
        for rotation in rotations {
            if sessions.insert(rotation.sessionID).inserted {
                index.append(posted.count)
                posted.append(rotation)
            } else {
                index.append(nil)
            }
        }
        var rotated = [SessionInfo?](repeating: nil, count: posted.count)
        if !posted.isEmpty {
            for row in try await client.rows(RotateStatement(rotations: posted), logger: logger) {
                let (n, session) = try RotationSQL.read(row)
                guard rotated.indices.contains(n) else { throw BatchMismatch() }
                rotated[n] = session
            }
        }
        return index.map { $0.flatMap { rotated[$0] } }
    }
}

import BrokerCore
import Foundation
import Logging
import PostgresNIO

extension Database {
    public var sessionPurge: SessionPurge { SessionPurge(client: client, logger: logger) }
}

/// Deletes sessions that can no longer be used (expired, idle past their refresh token's
/// lifetime, or revoked) once they ended more than a grace period ago, with their spent refresh
/// tokens; and spent refresh tokens past their own expiry. A sign-in's session is what dates
/// the identity's last sign-in and the account's last visit (decision 0013), so each batch first
/// folds its sessions' latest start into `identities.last_sign_in_at` and `accounts.last_seen_at`,
/// in the same statement. It walks the sessions in primary-key order from a cursor, at most
/// `batch` rows a statement: no statement scans the table or holds locks for long, and a pass
/// reads each session once. Sessions another transaction holds are left for the next pass.
public struct SessionPurge: Sendable {
    let client: PostgresClient
    let logger: Logger

    /// How long an ended session is kept (support questions, reuse answers, the sessions list).
    public static let grace: TimeInterval = 86_400

    public struct Batch: Sendable, Equatable {
        /// Rows deleted (sessions, or spent refresh tokens).
        public var deleted: Int
        /// Where the next batch starts; nil once the walk reached the end of the table.
        public var cursor: UUID?
    }

    /// One batch of the walk, from after `cursor` (nil: the start).
    public func purgeSessions(endedBefore cutoff: Date, after cursor: UUID?, batch: Int = 5_000) async throws -> Batch {
        let start = cursor ?? Self.firstID
        let rows = try await client.rows(
            """
            WITH scanned AS (
                SELECT id FROM sessions WHERE id > \(start) ORDER BY id LIMIT \(batch)
            ), doomed AS (
                SELECT s.id, s.tenant_id, s.account_id, s.identity_id, s.created_at
                FROM sessions s JOIN scanned USING (id)
                WHERE s.expires_at < \(cutoff) OR s.refresh_token_expires_at < \(cutoff) OR s.revoked_at < \(cutoff)
                FOR UPDATE OF s SKIP LOCKED
            ), identity_stamps AS (
                UPDATE identities i SET last_sign_in_at = l.at
                FROM (SELECT tenant_id, identity_id, max(created_at) AS at FROM doomed
                      WHERE identity_id IS NOT NULL GROUP BY tenant_id, identity_id) l
                WHERE i.tenant_id = l.tenant_id AND i.id = l.identity_id
                    AND (i.last_sign_in_at IS NULL OR i.last_sign_in_at < l.at)
            ), account_stamps AS (
                UPDATE accounts a SET last_seen_at = l.at
                FROM (SELECT tenant_id, account_id, max(created_at) AS at FROM doomed GROUP BY tenant_id, account_id) l
                WHERE a.tenant_id = l.tenant_id AND a.id = l.account_id
                    AND (a.last_seen_at IS NULL OR a.last_seen_at < l.at)
            ), deleted AS (
                DELETE FROM sessions s USING doomed d WHERE s.tenant_id = d.tenant_id AND s.id = d.id RETURNING 1
            )
            SELECT (SELECT count(*) FROM deleted)::int8, (SELECT id FROM scanned ORDER BY id DESC LIMIT 1)
            """, logger: logger)
        return try Self.batch(rows)
    }

    /// Spent refresh tokens (kept to recognise a reuse) past their own expiry: a token that could
    /// no longer be used proves nothing when it comes back. One batch of a walk in primary-key
    /// order (ids are time-ordered), from after `cursor`.
    public func purgeSpentRefreshTokens(expiredBefore cutoff: Date, after cursor: UUID?, batch: Int = 5_000) async throws -> Batch {
        let start = cursor ?? Self.firstID
        let rows = try await client.rows(
            """
            WITH scanned AS (
                SELECT id FROM refresh_tokens WHERE id > \(start) ORDER BY id LIMIT \(batch)
            ), deleted AS (
                DELETE FROM refresh_tokens r USING scanned WHERE r.id = scanned.id AND r.expires_at < \(cutoff) RETURNING 1
            )
            SELECT (SELECT count(*) FROM deleted)::int8, (SELECT id FROM scanned ORDER BY id DESC LIMIT 1)
            """, logger: logger)
        return try Self.batch(rows)
    }

    /// A walk statement's one row: rows deleted, and the last id it scanned (null at the end).
    private static func batch(_ rows: [PostgresRow]) throws -> Batch {
        guard let row = rows.first else { return Batch(deleted: 0, cursor: nil) }
        var reader = RowReader(row)
        return Batch(deleted: try reader.next(), cursor: try reader.next())
    }

    /// Runs `step` from the start of its table to the end; the rows it deleted.
    private static func walk(_ step: (UUID?) async throws -> Batch) async throws -> Int {
        var deleted = 0
        var cursor: UUID?
        repeat {
            try Task.checkCancellation()
            let done = try await step(cursor)
            deleted += done.deleted
            cursor = done.cursor
        } while cursor != nil
        return deleted
    }

    static let firstID = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))

    /// A whole pass: every session once, then every spent refresh token once. Returns
    /// the sessions and tokens deleted.
    public func pass(now: Date = Date(), batch: Int = 5_000) async throws -> (sessions: Int, refreshTokens: Int) {
        let cutoff = now.addingTimeInterval(-Self.grace)
        let sessions = try await Self.walk { try await purgeSessions(endedBefore: cutoff, after: $0, batch: batch) }
        let tokens = try await Self.walk { try await purgeSpentRefreshTokens(expiredBefore: cutoff, after: $0, batch: batch) }
        return (sessions, tokens)
    }
}

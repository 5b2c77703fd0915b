import BrokerCore
import Foundation
import PostgresNIO
import Storage
import TestSupport
import Testing

/// Migration 0003 moves each session's live refresh token onto the session and keeps only
/// spent tokens in `refresh_tokens` (decision 0012).
@Suite struct RefreshTokenMigrationTests {
    @Test func liveTokensMoveOntoTheirSessionsAndSpentOnesStay() async throws {
        try await TestDatabase.withFresh(migrated: false) { database, _ in
            let all = try Migration.bundled()
            let before = database.migrator(migrations: all.filter { $0.version < 3 })
            try await before.migrate()
            // A raw row: the repositories read columns of later migrations.
            let tenantID = UUID()
            try await database.client.query(
                "INSERT INTO tenants (id, slug, display_name) VALUES (\(tenantID), 'moved', 'moved')", logger: TestDatabase.logger)
            let account = UUID()
            let (rotated, fresh) = (UUID(), UUID())
            let spentHash = Data(repeating: 1, count: 32)
            let liveHash = Data(repeating: 2, count: 32)
            let freshHash = Data(repeating: 3, count: 32)
            _ = try await database.client.query(
                "INSERT INTO accounts (id, tenant_id) VALUES (\(account), \(tenantID))", logger: TestDatabase.logger)
            for session in [rotated, fresh] {
                _ = try await database.client.query(
                    """
                    INSERT INTO sessions (id, tenant_id, account_id, idp, expires_at)
                    VALUES (\(session), \(tenantID), \(account), 'apple', now() + interval '60 days')
                    """, logger: TestDatabase.logger)
            }
            // `rotated` was refreshed once: its first token is spent, its second is live.
            let first = UUID()
            _ = try await database.client.query(
                """
                INSERT INTO refresh_tokens (id, tenant_id, session_id, token_hash, created_at, expires_at, used_at) VALUES
                    (\(first), \(tenantID), \(rotated), \(spentHash), now() - interval '1 day', now() + interval '29 days', now()),
                    (\(UUID()), \(tenantID), \(rotated), \(liveHash), now(), now() + interval '30 days', NULL),
                    (\(UUID()), \(tenantID), \(fresh), \(freshHash), now(), now() + interval '30 days', NULL)
                """, logger: TestDatabase.logger)

            let applied = try await database.migrator().migrate()
            #expect(applied.map(\.version) == all.filter { $0.version >= 3 }.map(\.version))

            let sessions = try await database.client.query(
                "SELECT id, refresh_token_hash, refresh_token_expires_at > now() FROM sessions ORDER BY id",
                logger: TestDatabase.logger)
            var held: [UUID: Data] = [:]
            for try await (id, hash, live) in sessions.decode((UUID, Data?, Bool?).self) {
                held[id] = hash
                #expect(live == true)
            }
            #expect(held == [rotated: liveHash, fresh: freshHash])
            let ledger = try await database.client.query(
                "SELECT token_hash FROM refresh_tokens", logger: TestDatabase.logger)
            var spent: [Data] = []
            for try await hash in ledger.decode(Data.self) { spent.append(hash) }
            #expect(spent == [spentHash])

            // The moved tokens work (issued before tokens named their session: found by hash,
            // migration 0010): the live one rotates, the spent one revokes its family.
            let sessionsRepository = database.sessions
            let info = try SignInFixtures.rotated(
                try await sessionsRepository.refresh(
                    tenantID: tenantID, tokenHash: freshHash, sessionID: nil, successorHash: Data(repeating: 4, count: 32),
                    idleLifetime: 3_600, reuseInterval: 10))
            #expect(info.sessionID == fresh)
            #expect(
                try await sessionsRepository.refresh(
                    tenantID: tenantID, tokenHash: spentHash, sessionID: nil, successorHash: Data(repeating: 5, count: 32),
                    idleLifetime: 3_600, reuseInterval: 0) == .reused)
            #expect(try await sessionsRepository.liveSession(tenantID: tenantID, sessionID: rotated) == nil)
        }
    }
}

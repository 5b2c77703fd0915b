import BrokerCore
import Foundation
import PostgresNIO
import Storage
import TestSupport
import Testing

/// Rotation keeps the live refresh token on its session and records the spent one in the
/// ledger; expired tokens and sessions rotate nothing (decision 0012).
@Suite struct SessionRepositoryTests {
    let statements = SignInFixtures()

    func openSession(_ database: Database, tenantID: UUID, hash: Data) async throws -> UUID {
        var request = statements.request(tenantID: tenantID, email: "a@example.com")
        request.session.refreshTokenHash = hash
        return try #require(try await database.accounts.signIn(request)).sessionID
    }

    func hash(_ byte: UInt8) -> Data { Data(repeating: byte, count: 32) }

    /// A fresh database with a tenant `slug` whose one session (refresh token `hash(1)`) has
    /// been rotated once to `hash(2)` with `idleLifetime`.
    func withOneRotation(
        _ slug: String, idleLifetime: TimeInterval,
        _ body: @Sendable (Database, Tenant, _ session: UUID, SessionRepository.SessionInfo) async throws -> Void
    ) async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant(slug, in: database)
            let session = try await openSession(database, tenantID: tenant.id, hash: hash(1))
            let info = try SignInFixtures.rotated(
                try await database.sessions.refresh(
                    tenantID: tenant.id, tokenHash: hash(1), sessionID: session, successorHash: hash(2), idleLifetime: idleLifetime,
                    reuseInterval: 10))
            #expect(info.sessionID == session)
            try await body(database, tenant, session, info)
        }
    }

    @Test func rotationReplacesTheTokenOnTheSessionAndRecordsTheSpentOne() async throws {
        try await withOneRotation("rotate", idleLifetime: 3_600) { database, tenant, session, _ in
            let sessions = database.sessions
            #expect(try await sessions.introspectRefreshToken(tenantID: tenant.id, tokenHash: hash(1), sessionID: session) == nil)
            #expect(
                try await sessions.introspectRefreshToken(tenantID: tenant.id, tokenHash: hash(2), sessionID: session)?.sessionID == session
            )
            // The successor's idle expiry is an hour away (within the session's absolute one).
            let successor = try #require(
                try await sessions.introspectRefreshToken(tenantID: tenant.id, tokenHash: hash(2), sessionID: session))
            #expect(abs(successor.expiresAt.timeIntervalSinceNow - 3_600) < 60)

            let ledger = try await database.client.query(
                "SELECT session_id, token_hash, used_at IS NOT NULL FROM refresh_tokens WHERE tenant_id = \(tenant.id)")
            var rows: [(UUID, Data, Bool)] = []
            for try await row in ledger.decode((UUID, Data, Bool).self) { rows.append(row) }
            #expect(rows.count == 1)
            #expect(rows.first?.0 == session && rows.first?.1 == hash(1) && rows.first?.2 == true)

            // Another tenant cannot rotate, introspect or revoke it.
            let other = try await TestDatabase.createTenant("other", in: database)
            #expect(
                try await sessions.refresh(
                    tenantID: other.id, tokenHash: hash(2), sessionID: session, successorHash: hash(3), idleLifetime: 60, reuseInterval: 10)
                    == .invalid)
            #expect(try await sessions.introspectRefreshToken(tenantID: other.id, tokenHash: hash(2), sessionID: session) == nil)
            #expect(try await !sessions.revokeByRefreshToken(tenantID: other.id, tokenHash: hash(1), sessionID: session, reason: "test"))
            #expect(try await sessions.liveSession(tenantID: tenant.id, sessionID: session) != nil)
        }
    }

    @Test func anIdleExpiredTokenOrAnEndedSessionRotatesNothing() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("expired", in: database)
            let idle = try await openSession(database, tenantID: tenant.id, hash: hash(1))
            let ended = try await openSession(database, tenantID: tenant.id, hash: hash(2))
            _ = try await database.client.query(
                "UPDATE sessions SET refresh_token_expires_at = now() - interval '1 second' WHERE id = \(idle)")
            _ = try await database.client.query(
                "UPDATE sessions SET expires_at = now() - interval '1 second' WHERE id = \(ended)")
            let sessions = database.sessions
            for (token, session) in [(hash(1), idle), (hash(2), ended)] {
                #expect(
                    try await sessions.refresh(
                        tenantID: tenant.id, tokenHash: token, sessionID: session, successorHash: hash(9), idleLifetime: 60,
                        reuseInterval: 10)
                        == .invalid)
                #expect(try await sessions.introspectRefreshToken(tenantID: tenant.id, tokenHash: token, sessionID: session) == nil)
            }
            let ledger = try await database.client.query("SELECT count(*)::int8 FROM refresh_tokens")
            for try await count in ledger.decode(Int.self) { #expect(count == 0) }
        }
    }

    @Test func theSuccessorNeverOutlivesItsSession() async throws {
        // The request's session ends in an hour; a day of idle lifetime is cut to that.
        try await withOneRotation("capped", idleLifetime: 86_400) { database, tenant, session, info in
            let successor = try #require(
                try await database.sessions.introspectRefreshToken(tenantID: tenant.id, tokenHash: hash(2), sessionID: session))
            #expect(abs(successor.expiresAt.timeIntervalSince(info.expiresAt)) < 0.01)
        }
    }

    @Test func aRepeatWithinTheReuseIntervalFindsTheLiveSuccessorAndChangesNothing() async throws {
        try await withOneRotation("repeat", idleLifetime: 3_600) { database, tenant, session, _ in
            let sessions = database.sessions
            // The same token with the same successor: the rotation already happened.
            let outcome = try await sessions.refresh(
                tenantID: tenant.id, tokenHash: hash(1), sessionID: session, successorHash: hash(2), idleLifetime: 3_600, reuseInterval: 10)
            guard case .repeated(let info) = outcome else {
                Issue.record("expected a repeat, got \(outcome)")
                return
            }
            #expect(info.sessionID == session)
            #expect(
                try await sessions.introspectRefreshToken(tenantID: tenant.id, tokenHash: hash(2), sessionID: session)?.sessionID == session
            )
            // Another tenant's repeat finds nothing and revokes nothing.
            let other = try await TestDatabase.createTenant("other", in: database)
            #expect(
                try await sessions.refresh(
                    tenantID: other.id, tokenHash: hash(1), sessionID: session, successorHash: hash(2), idleLifetime: 60, reuseInterval: 10)
                    == .invalid)
            #expect(try await sessions.liveSession(tenantID: tenant.id, sessionID: session) != nil)
        }
    }

    @Test func aSpentTokenPastTheIntervalOrWithTheIntervalOffRevokesItsFamily() async throws {
        for interval: TimeInterval in [0, 10] {
            try await withOneRotation("reuse", idleLifetime: 3_600) { database, tenant, session, _ in
                if interval > 0 {
                    try await database.client.query("UPDATE refresh_tokens SET used_at = used_at - interval '11 seconds'")
                }
                let outcome = try await database.sessions.refresh(
                    tenantID: tenant.id, tokenHash: hash(1), sessionID: session, successorHash: hash(2), idleLifetime: 3_600,
                    reuseInterval: interval)
                #expect(outcome == .reused)
                #expect(try await database.sessions.liveSession(tenantID: tenant.id, sessionID: session) == nil)
            }
        }
    }

    @Test func aRepeatWhoseSuccessorMovedOnIsInvalidAndRevokesNothing() async throws {
        try await withOneRotation("moved", idleLifetime: 3_600) { database, tenant, session, _ in
            let sessions = database.sessions
            _ = try SignInFixtures.rotated(
                try await sessions.refresh(
                    tenantID: tenant.id, tokenHash: hash(2), sessionID: session, successorHash: hash(3), idleLifetime: 3_600,
                    reuseInterval: 10))
            #expect(
                try await sessions.refresh(
                    tenantID: tenant.id, tokenHash: hash(1), sessionID: session, successorHash: hash(2), idleLifetime: 3_600,
                    reuseInterval: 10)
                    == .invalid)
            #expect(try await sessions.liveSession(tenantID: tenant.id, sessionID: session) != nil)
        }
    }
}

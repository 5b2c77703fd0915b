import BrokerCore
import Foundation
import PostgresNIO
import TestSupport
import Testing

@testable import Storage

/// A refresh rotation updates its session in place (decision 0095): as a heap-only tuple, with
/// no new entry in any index of `sessions`. That needs two things: no index names a column the
/// rotation writes (a partial index's predicate included), and the session's page has room for
/// the new version. Until migration 0036 the legacy tokens' index named `refresh_token_hash` and
/// the pages were packed full, so no rotation was in place.
@Suite struct SessionRotationInPlaceTests {
    /// The columns the rotation's `SET` list writes, read from the statement itself.
    static func rotationWrites() throws -> [String] {
        let sql = SessionRepository.RotateStatement.sql
        let set = try #require(sql.range(of: #"UPDATE sessions s SET (?s:.*?)\bFROM\b"#, options: .regularExpression))
        let list = sql[set].dropFirst("UPDATE sessions s SET".count).dropLast("FROM".count)
        return list.matches(of: /(?:^|,)\s*([a-z_]+)\s*=/).map { String($0.output.1) }
    }

    @Test func theRotationsColumnsAreReadFromItsStatement() throws {
        #expect(try Self.rotationWrites() == ["refresh_token_hash", "refresh_token_expires_at", "last_refreshed_at"])
        // The legacy tokens' index as migration 0010 made it is what the check refuses.
        let before =
            "CREATE UNIQUE INDEX sessions_legacy_refresh_token_idx ON public.sessions USING btree (refresh_token_hash) WHERE refresh_token_legacy"
        #expect(
            HeapTuple.naming(try Self.rotationWrites(), in: [("sessions_legacy_refresh_token_idx", before)])
                == ["sessions_legacy_refresh_token_idx names refresh_token_hash: \(before)"])
        #expect(
            HeapTuple.naming(try Self.rotationWrites(), in: [("x", before.replacingOccurrences(of: "(refresh", with: "(legacy_refresh"))])
                == [])
    }

    @Test func noIndexOfSessionsNamesAColumnARotationWrites() async throws {
        let written = try Self.rotationWrites()
        try await TestDatabase.withFresh { database, _ in
            let indexes = try await HeapTuple.indexes(of: "sessions", in: database)
            // The key, the account's sessions, the legacy tokens'.
            #expect(indexes.count >= 3 && indexes.contains { $0.name == "sessions_legacy_refresh_token_idx" })
            #expect(HeapTuple.naming(written, in: indexes) == [], "so a rotation is never in place")
        }
    }

    /// Sessions enough to fill more than one page, then the rotation of one on the first page:
    /// it stays on that page, as a heap-only tuple, because the page was left room. A legacy
    /// session's rotation is found by its hash through the legacy index before and after.
    @Test func aRotationOnAFilledPageStaysInPlace() async throws {
        try await TestDatabase.withFresh { database, _ in
            try await database.client.query("CREATE EXTENSION IF NOT EXISTS pageinspect")
            let tenant = try await TestDatabase.createTenant("rotations", in: database)
            let other = try await TestDatabase.createTenant("other", in: database)
            var cases: [RefreshRotationBatchTests.Case] = []
            for n in 0..<80 {
                cases.append(
                    try await RefreshRotationBatchTests.makeCase(
                        .live, label: "p\(n)", tenant: tenant.id, other: other.id, database: database))
            }
            let first = cases[0]
            let page = try await HeapTuple.page("sessions", "id", first.session, in: database)
            let last = try await HeapTuple.page("sessions", "id", cases[79].session, in: database)
            try #require(last > page, "80 sessions fill more than a page")

            let outcomes = try await SessionRepository.rotate([first.posted], client: database.client, logger: database.logger)
            try #require(outcomes.count == 1 && outcomes[0] != nil)
            #expect(try await HeapTuple.page("sessions", "id", first.session, in: database) == page)
            #expect(try await HeapTuple.isHeapOnly("sessions", "id", first.session, in: database))

            // A session of a token issued before migration 0010: its hash is in the legacy index,
            // and the successor's is after the rotation.
            let legacy = cases[1]
            try await database.client.query("UPDATE sessions SET refresh_token_legacy = true WHERE id = \(legacy.session)")
            let rotation = legacy.posted.rotation
            let outcome = try await database.sessions.refresh(
                tenantID: tenant.id, tokenHash: rotation.tokenHash, sessionID: nil, successorHash: rotation.successorHash,
                idleLifetime: 600, reuseInterval: 0)
            guard case .rotated(let session) = outcome else {
                Issue.record("the legacy token did not rotate: \(outcome)")
                return
            }
            #expect(session.sessionID == legacy.session)
            let stored = try await database.client.query(
                "SELECT legacy_refresh_token_hash = refresh_token_hash FROM sessions WHERE id = \(legacy.session)")
            for try await same in stored.decode(Bool.self) { #expect(same) }
            let unmarked = try await database.client.query(
                "SELECT count(*) FROM sessions WHERE NOT refresh_token_legacy AND legacy_refresh_token_hash IS NOT NULL")
            for try await count in unmarked.decode(Int.self) { #expect(count == 0) }
        }
    }
}

import Foundation
import Logging
import PostgresNIO
import Testing
import TestSupport

@testable import Storage

/// Statements that fail after PostgreSQL has described their rows (a division by zero here; a
/// unique violation in an INSERT … RETURNING for a replayed sign-in; a statement timeout) give
/// their connection back to the pool (decision 0033). The race that kept connections in
/// PostgresNIO's `query`/`execute` (a failure arriving before the caller attached to the row
/// stream) needs the caller's thread preempted at one instant, and this test does not force
/// it: it checks that `rows` gives every connection back through thousands of failures. The
/// whole suite (2,000 concurrent replays of one token among 400 tests on two cores) hung on it
/// in two runs of three before; not since.
@Suite struct PoolLeaseLeakTests {
    @Test func statementsFailingAfterTheirRowDescriptionGiveTheirConnectionBack() async throws {
        try await TestDatabase.withFresh(migrated: false) { database, _ in
            let failing: PostgresQuery = "SELECT 1 / (g - 1) FROM generate_series(1, 1) g"
            let failures = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<16 {
                    group.addTask {
                        var failed = 0
                        for _ in 0..<200 {
                            do { _ = try await database.client.rows(failing, logger: database.logger) } catch { failed += 1 }
                        }
                        return failed
                    }
                }
                return try await group.reduce(0, +)
            }
            #expect(failures == 3_200)
            let answered = await database.ping(timeout: .seconds(10))
            #expect(answered, "the pool has no connection left to give")
        }
    }
}

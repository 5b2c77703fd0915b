import Foundation
import Logging
import Synchronization
import Testing

@testable import Storage

/// What a worker does with an outcome a third party already acted on when the database fails
/// to take it (``OutcomeWrite``): tried again while the database is unavailable, for as long as
/// the row's lease allows; any other failure at once.
@Suite struct OutcomeWriteTests {
    static let logger = Logger(label: "test")

    @Test func aWriteTheDatabaseRefusedWhileUnavailableIsTriedUntilItLands() async throws {
        let attempts = Mutex(0)
        let written = try await OutcomeWrite.retrying(lease: 60, what: "test outcome", logger: Self.logger) { () async throws -> String in
            let attempt = attempts.withLock {
                $0 += 1; return $0
            }
            if attempt < 3 { throw DatabaseDeadlineExceeded() }
            return "written"
        }
        #expect(written == "written")
        #expect(attempts.withLock { $0 } == 3)
    }

    /// An attempt that never answers (a statement on a connection that died mid-failover
    /// without telling the client) is cut off at its timeout and the write tried again, where
    /// it used to hold its worker's round for good (issue 43's failover).
    @Test func anAttemptThatNeverAnswersIsCutOffAndTriedAgain() async throws {
        let attempts = Mutex(0)
        let cancelled = Mutex(false)
        let written = try await OutcomeWrite.retrying(
            lease: 60, what: "test outcome", logger: Self.logger, attemptTimeout: .milliseconds(200)
        ) { () async throws -> String in
            let attempt = attempts.withLock {
                $0 += 1; return $0
            }
            if attempt == 1 {
                // Waits until cancelled: nothing else ends it.
                let (never, ending) = AsyncStream.makeStream(of: Void.self)
                await withTaskCancellationHandler {
                    for await _ in never {}
                } onCancel: {
                    cancelled.withLock { $0 = true }
                    ending.finish()
                }
                throw CancellationError()
            }
            return "written"
        }
        #expect(written == "written")
        #expect(attempts.withLock { $0 } == 2)
        #expect(cancelled.withLock { $0 }, "the attempt that never answered was cancelled")
    }

    @Test func anotherFailureIsNotTriedAgain() async {
        struct Refused: Error {}
        let attempts = Mutex(0)
        await #expect(throws: Refused.self) {
            try await OutcomeWrite.retrying(lease: 60, what: "test outcome", logger: Self.logger) {
                attempts.withLock { $0 += 1 }
                throw Refused()
            }
        }
        #expect(attempts.withLock { $0 } == 1)
    }

    @Test func theDatabaseStillDownWhenTheLeaseRunsOutIsThrown() async {
        let attempts = Mutex(0)
        // A lease of 0.5 s leaves 0.4 s: the first try, 0.2 s, the second try; the next wait
        // (0.4 s) would pass it. (One try only when this process waited 0.2 s for a core.)
        await #expect(throws: DatabaseDeadlineExceeded.self) {
            try await OutcomeWrite.retrying(lease: 0.5, what: "test outcome", logger: Self.logger) {
                attempts.withLock { $0 += 1 }
                throw DatabaseDeadlineExceeded()
            }
        }
        #expect((1...2).contains(attempts.withLock { $0 }))
    }
}

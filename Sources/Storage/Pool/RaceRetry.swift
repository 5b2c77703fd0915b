import Logging
import PostgresNIO

/// Runs a write again when a concurrent write made PostgreSQL abort it (issue 39 C10): a
/// deadlock (40P01) or serialization failure (40001) between two statements that touch one
/// account, or a foreign key (23503) whose row a transaction that committed first removed (a
/// session opened for an identity that an account deletion just deleted). Each attempt is one
/// statement or one transaction, so a failed attempt wrote nothing; the next one sees what the
/// other committed and decides again. Such a race was answered 500 before.
enum RaceRetry {
    static let attempts = 4

    static func isRace(_ error: any Error) -> Bool {
        switch error.postgresError?.sqlState {
        case "40P01", "40001", "23503": true
        default: false
        }
    }

    static func run<T: Sendable>(
        _ what: StaticString, logger: Logger, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T
    ) async throws -> T {
        var attempt = 1
        while true {
            do {
                return try await body()
            } catch let error where attempt < attempts && isRace(error) {
                logger.debug(
                    "a concurrent write aborted the statement; running it again",
                    metadata: ["what": "\(what)", "sqlstate": "\(error.postgresError?.sqlState ?? "")", "attempt": "\(attempt)"])
                attempt += 1
            }
        }
    }
}

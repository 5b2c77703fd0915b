import Foundation
import Logging

/// Writing down what a third party already did for a taken queue row: Apple revoked a token,
/// a product backend took a webhook, Apple answered a credential check. When the database
/// goes away between the call and its record, the outcome is kept in memory and written as
/// soon as the database is back, for as long as the row's lease holds it for this worker.
/// Without that, the row would come due again when its lease ran out and the call would be
/// made a second time. A worker that dies in that gap still makes it again (at least once).
enum OutcomeWrite {
    /// How much of the lease the write may use: the rest keeps another worker from taking the
    /// row while this one is still writing it.
    static let leaseShare = 0.8

    /// `write`, retried while the database is unavailable until `lease` seconds (times
    /// ``leaseShare``) from now have passed; any other failure, or the database still down
    /// then, is thrown. The write is not cancelled with the worker that asks for it (issue 39
    /// D11): a stop that comes once the call is done still has its outcome written (the
    /// process's shutdown deadline bounds it). Each attempt is bounded by `attemptTimeout`
    /// (``WorkerCall/timeout`` unless a test says otherwise; decision 0090).
    static func retrying<T: Sendable>(
        lease: TimeInterval, what: @autoclosure () -> String, logger: Logger, attemptTimeout: Duration = WorkerCall.timeout,
        _ write: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let what = what()
        return try await Task {
            try await retryingNow(lease: lease, what: what, logger: logger, attemptTimeout: attemptTimeout, write)
        }.value
    }

    private static func retryingNow<T: Sendable>(
        lease: TimeInterval, what: String, logger: Logger, attemptTimeout: Duration, _ write: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let deadline = ContinuousClock.now + .milliseconds(Int64(lease * leaseShare * 1_000))
        var wait = Duration.milliseconds(200)
        var waited = false
        while true {
            do {
                let written = try await withDatabaseDeadline(attemptTimeout, write)
                if waited { logger.notice("\(what): written now that the database is back") }
                return written
            } catch  where error.isDatabaseUnavailable {
                guard ContinuousClock.now + wait < deadline else { throw error }
                if !waited {
                    logger.warning(
                        "\(what): done, but the database is unavailable; it is written when the database is back",
                        metadata: ["error": "\(String(describing: type(of: error)))"])
                    waited = true
                }
                try await Task.sleep(for: wait)
                wait = min(wait * 2, .seconds(2))
            }
        }
    }
}

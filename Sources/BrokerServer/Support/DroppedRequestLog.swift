import Logging
import Synchronization

/// Requests whose client went away before it had sent the whole request (a body cut short, a
/// reset connection): each is logged at debug, and at the default level only a count, at most
/// once a `period` (the first drop after a quiet period is counted at once). A client that
/// drops many connections cannot fill the log.
final class DroppedRequestLog: Sendable {
    static let shared = DroppedRequestLog()

    private struct State {
        var sinceLastReport = 0
        var lastReport: ContinuousClock.Instant?
    }

    private let state = Mutex(State())
    let period: Duration

    init(period: Duration = .seconds(60)) {
        self.period = period
    }

    /// Records one drop; returns the count to report at the default level now, if it is time.
    func record(at now: ContinuousClock.Instant = .now) -> Int? {
        state.withLock { state in
            state.sinceLastReport += 1
            if let last = state.lastReport, now - last < period { return nil }
            defer { state = State(sinceLastReport: 0, lastReport: now) }
            return state.sinceLastReport
        }
    }

    func log(_ logger: Logger, error: any Error) {
        logger.debug("client went away mid-request", metadata: ["error": "\(String(describing: type(of: error)))"])
        if let count = record() {
            logger.notice(
                "clients went away mid-request", metadata: ["requests": "\(count)", "period_seconds": "\(period.components.seconds)"])
        }
    }
}

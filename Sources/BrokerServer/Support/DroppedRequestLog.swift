import Logging
import Synchronization

/// Requests a client failed: it went away before it had sent the whole request (a body cut
/// short, a reset connection), or sent part of its body and stopped until the request's
/// deadline (issue 39 F19). Each is logged at debug, and at the default level only a count, at
/// most once a `period` (the first after a quiet period is counted at once). A client that
/// drops many connections or leaves many requests half-sent cannot fill the log.
final class DroppedRequestLog: Sendable {
    /// Clients that went away mid-request.
    static let shared = DroppedRequestLog(one: "client went away mid-request", count: "clients went away mid-request")
    /// Clients that stopped sending a request's body until its deadline.
    static let unfinishedBodies = DroppedRequestLog(
        one: "client did not send the whole request body before the request's deadline",
        count: "clients did not send the whole request body before the request's deadline")

    private struct State {
        var sinceLastReport = 0
        var lastReport: ContinuousClock.Instant?
        var total = 0
    }

    private let state = Mutex(State())
    let period: Duration
    /// The debug line of one request, and the line of the periodic count.
    private let one: String
    private let count: String

    init(period: Duration = .seconds(60), one: String = "client went away mid-request", count: String = "clients went away mid-request") {
        self.period = period
        self.one = one
        self.count = count
    }

    /// Every request recorded since the process started.
    var total: Int { state.withLock { $0.total } }

    /// Records one request; returns the count to report at the default level now, if it is time.
    func record(at now: ContinuousClock.Instant = .now) -> Int? {
        state.withLock { state in
            state.sinceLastReport += 1
            state.total += 1
            if let last = state.lastReport, now - last < period { return nil }
            defer { (state.sinceLastReport, state.lastReport) = (0, now) }
            return state.sinceLastReport
        }
    }

    func log(_ logger: Logger, error: (any Error)?) {
        logger.debug("\(one)", metadata: error.map { ["error": "\(String(describing: type(of: $0)))"] } ?? [:])
        if let reported = record() {
            logger.notice("\(count)", metadata: ["requests": "\(reported)", "period_seconds": "\(period.components.seconds)"])
        }
    }
}

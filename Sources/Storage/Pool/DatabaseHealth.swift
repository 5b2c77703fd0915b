import Synchronization

/// What this process has seen of its database lately: when it last could not reach it. Every
/// part that meets an outage reports it here (a failed ping, a statement that failed for want of
/// a connection, a request whose deadline passed while the database did not answer), and
/// ``DatabasePool`` wakes on the first report to check the pool and replace it once the
/// database accepts connections again (decision 0032).
public final class DatabaseHealth: Sendable {
    private let lastUnavailable = Mutex<ContinuousClock.Instant?>(nil)
    private let reports: AsyncStream<Void>
    private let reportsContinuation: AsyncStream<Void>.Continuation

    public init() {
        (reports, reportsContinuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// The database could not be reached at `instant`.
    public func reportUnavailable(at instant: ContinuousClock.Instant = .now) {
        note(instant)
        reportsContinuation.yield()
    }

    /// Records an outage without waking the pool's supervisor (it is the one reporting).
    func note(_ instant: ContinuousClock.Instant = .now) {
        lastUnavailable.withLock { last in
            if last.map({ $0 < instant }) ?? true { last = instant }
        }
    }

    /// Whether the database was seen unreachable at or after `instant`: a request that began
    /// then and ran out of time waited on the outage, whatever the database says now.
    public func wasUnavailable(since instant: ContinuousClock.Instant) -> Bool {
        lastUnavailable.withLock { $0.map { $0 >= instant } ?? false }
    }

    /// The reports, coalesced: one element stands for every report since the last one read.
    /// One reader only (the pool's supervisor).
    var reported: AsyncStream<Void> { reports }
}

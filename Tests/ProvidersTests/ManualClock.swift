import Synchronization

/// A clock a test moves by hand.
final class ManualClock: Sendable {
    private let start = ContinuousClock.now
    private let offset = Mutex(Duration.zero)

    var now: ContinuousClock.Instant { start + offset.withLock { $0 } }

    func advance(by duration: Duration) { offset.withLock { $0 += duration } }
}

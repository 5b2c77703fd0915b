import Synchronization

/// A clock that moves only when told.
public final class AdvancingClock: Sendable {
    private let instant = Mutex(ContinuousClock.now)

    public init() {}

    public var now: ContinuousClock.Instant { instant.withLock { $0 } }

    public func advance(by duration: Duration) { instant.withLock { $0 += duration } }

    public var reader: @Sendable () -> ContinuousClock.Instant { { self.now } }
}

import Foundation

/// When a failed call to another party is tried again (Apple's revocations, webhook
/// deliveries): `base` doubling up to `cap`; after `maxAttempts` calls it is given up. The
/// defaults (30 s doubling to 1 h, 30 calls) keep trying for about a day.
public struct RetryBackoff: Sendable {
    public var base: TimeInterval = 30
    public var cap: TimeInterval = 3_600
    public var maxAttempts = 30

    public init() {}

    /// The time of the next call after `attempts` failed calls; nil: give up.
    public func nextAttempt(after attempts: Int, now: Date) -> Date? {
        guard attempts < maxAttempts else { return nil }
        let exponent = Double(min(max(attempts - 1, 0), 30))
        return now.addingTimeInterval(min(base * pow(2, exponent), cap))
    }
}

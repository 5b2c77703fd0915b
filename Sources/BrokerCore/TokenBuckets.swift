import Synchronization

/// A rate: `perSecond` tokens refill a bucket holding at most `burst`.
public struct RateLimit: Sendable, Equatable, Codable {
    public var perSecond: Int
    public var burst: Int

    public init(perSecond: Int, burst: Int) {
        self.perSecond = perSecond
        self.burst = burst
    }

    /// The limits' accepted range: a rate of at least 1 a second, a burst of at least the rate.
    public static let allowedRates = 1...1_000_000
    public static let allowedBursts = 1...2_000_000
}

/// Token buckets by key (an API key's id, a client address), in memory, per process. Taking a
/// token costs one mutex of one of 16 shards, never an actor hop or the database. The table is
/// bounded: when a shard is full, buckets that have refilled completely (an idle key is the same
/// as a new one) are dropped first, then the oldest half. `now` is the clock in seconds (tests
/// advance their own instead of sleeping).
public final class TokenBuckets<Key: Hashable & Sendable>: Sendable {
    /// What taking a token decided.
    public enum Decision: Sendable, Equatable {
        case allowed
        /// Refused: a token is back after this many seconds (at least 1, rounded up).
        case limited(retryAfter: Int)
    }

    private struct Bucket {
        var tokens: Double
        var updated: Double
    }

    private final class Shard: Sendable {
        let buckets = Mutex<[Key: Bucket]>([:])
    }

    private let shards: [Shard]
    private let capacityPerShard: Int
    public let now: @Sendable () -> Double

    public init(capacity: Int = 100_000, now: @escaping @Sendable () -> Double = TokenBucketClock.monotonicSeconds) {
        self.shards = (0..<16).map { _ in Shard() }
        self.capacityPerShard = max(1, capacity / 16)
        self.now = now
    }

    /// Takes one token from `key`'s bucket under `limit`.
    public func take(_ key: Key, limit: RateLimit) -> Decision {
        let instant = now()
        let rate = Double(max(1, limit.perSecond))
        let burst = Double(max(1, limit.burst))
        return shard(for: key).buckets.withLock { buckets in
            var bucket = buckets[key] ?? Bucket(tokens: burst, updated: instant)
            bucket.tokens = min(burst, bucket.tokens + max(0, instant - bucket.updated) * rate)
            bucket.updated = instant
            let decision: Decision
            if bucket.tokens >= 1 {
                bucket.tokens -= 1
                decision = .allowed
            } else {
                decision = .limited(retryAfter: max(1, Int(((1 - bucket.tokens) / rate).rounded(.up))))
            }
            if buckets[key] == nil, buckets.count >= capacityPerShard {
                Self.evict(&buckets, at: instant, rate: rate, burst: burst, capacity: capacityPerShard)
            }
            buckets[key] = bucket
            return decision
        }
    }

    /// Whether `key`'s bucket would give a token now, without taking one.
    public func hasToken(_ key: Key, limit: RateLimit) -> Bool {
        let instant = now()
        return shard(for: key).buckets.withLock { buckets in
            guard let bucket = buckets[key] else { return true }
            let tokens = min(Double(limit.burst), bucket.tokens + max(0, instant - bucket.updated) * Double(limit.perSecond))
            return tokens >= 1
        }
    }

    /// Buckets held (all shards), for tests and metrics.
    public var count: Int { shards.reduce(0) { sum, shard in sum + shard.buckets.withLock { $0.count } } }

    private func shard(for key: Key) -> Shard {
        shards[Int(UInt(bitPattern: key.hashValue) % UInt(shards.count))]
    }

    /// Drops the buckets that are full again (judged at this call's rate), then, if the shard is
    /// still full, the least recently used half.
    private static func evict(_ buckets: inout [Key: Bucket], at instant: Double, rate: Double, burst: Double, capacity: Int) {
        buckets = buckets.filter { $0.value.tokens + (instant - $0.value.updated) * rate < burst }
        guard buckets.count >= capacity else { return }
        let oldestFirst = buckets.sorted { $0.value.updated < $1.value.updated }
        for (key, _) in oldestFirst.prefix(buckets.count / 2) { buckets[key] = nil }
    }
}

public enum TokenBucketClock {
    /// Seconds on the monotonic clock.
    @Sendable public static func monotonicSeconds() -> Double {
        let components = ContinuousClock.now.duration(to: origin).components
        return -(Double(components.seconds) + Double(components.attoseconds) / 1e18)
    }

    private static let origin = ContinuousClock.now
}

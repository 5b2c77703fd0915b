import Foundation

/// How security events are sampled (decision 0020, issue 20 §6): the window, the bound on the
/// sampler's memory, and the clock it is measured by (injected by tests, which never sleep).
public struct SecurityEventSampling: Sendable {
    /// At most one row per bucket (tenant and reason; a known key for revoked keys and keys of
    /// disabled tenants) per window; the next row counts those left out.
    public var window: Duration
    /// Buckets kept at most; past it, new buckets of a kind share one overflow bucket per reason.
    public var maxBuckets: Int
    public var now: @Sendable () -> ContinuousClock.Instant

    public init(
        window: Duration = .seconds(10), maxBuckets: Int = 4_096,
        now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }
    ) {
        self.window = window
        self.maxBuckets = max(1, maxBuckets)
        self.now = now
    }
}

/// The sampling state: one bucket per (action, reason, scope). Pure; the recorder holds it
/// under a lock.
///
/// Scopes are chosen so that nobody outside can grow the table: keys that do not exist
/// (missing, malformed, unknown) share one bucket per reason with no tenant, and only tenants and
/// keys that exist in the database get buckets of their own. Buckets whose window ended are
/// pruned once a window, and those that left events out are handed
/// back to be written, so no count is lost. Past ``SecurityEventSampling/maxBuckets`` a new
/// bucket falls into its reason's overflow bucket.
package struct SecurityEventSampler {
    package enum Scope: Hashable {
        /// Events that name nothing that exists: one bucket per reason.
        case anonymous
        case tenant(UUID)
        case key(UUID)
        /// The table was full.
        case overflow
    }

    package struct Key: Hashable {
        package var action: String
        package var reason: String
        package var scope: Scope
    }

    /// What a row written for a bucket says of it, kept for a row written when it is pruned.
    package struct Subject: Sendable, Equatable {
        package var tenantID: UUID?
        package var target: String?
    }

    package struct Bucket {
        package var windowStart: ContinuousClock.Instant
        package var suppressed: Int
        package var subject: Subject
    }

    /// A row to write: the first event of a window, with the count left out before it, or the
    /// count of a pruned bucket.
    package struct Row: Equatable {
        package var key: Key
        package var subject: Subject
        package var notRecordedBefore: Int
        /// Written for a pruned bucket, not for an event.
        package var trailing: Bool
    }

    package let window: Duration
    package let maxBuckets: Int
    private(set) var buckets: [Key: Bucket] = [:]
    private var lastPrune: ContinuousClock.Instant?

    package init(window: Duration, maxBuckets: Int) {
        self.window = window
        self.maxBuckets = maxBuckets
    }

    /// Counts an event. Returns the row to write for it (nil: left out, counted) and the rows of
    /// buckets pruned now.
    package mutating func admit(_ requested: Key, subject: Subject, at now: ContinuousClock.Instant) -> (row: Row?, pruned: [Row]) {
        var key = requested
        if buckets[key] == nil, buckets.count >= maxBuckets, key.scope != .anonymous, key.scope != .overflow {
            key.scope = .overflow
        }
        let row: Row?
        if var bucket = buckets[key], now - bucket.windowStart < window {
            bucket.suppressed += 1
            buckets[key] = bucket
            row = nil
        } else {
            // A new bucket, or a new window of one: this event's row counts the last window's rest.
            // Anonymous and overflow buckets are one per action and reason: they may exceed the bound.
            row = Row(key: key, subject: subject, notRecordedBefore: buckets[key]?.suppressed ?? 0, trailing: false)
            buckets[key] = Bucket(windowStart: now, suppressed: 0, subject: subject)
        }
        let pruned = lastPrune.map { now - $0 >= window } ?? true ? prune(at: now) : []
        return (row, pruned)
    }

    /// Drops the buckets whose window ended; returns a row for each that left events out.
    private mutating func prune(at now: ContinuousClock.Instant) -> [Row] {
        lastPrune = now
        var rows: [Row] = []
        for (key, bucket) in buckets where now - bucket.windowStart >= window {
            if bucket.suppressed > 0 {
                rows.append(Row(key: key, subject: bucket.subject, notRecordedBefore: bucket.suppressed, trailing: true))
            }
            buckets[key] = nil
        }
        return rows
    }
}

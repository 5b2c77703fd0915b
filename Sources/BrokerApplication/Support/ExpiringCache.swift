import Synchronization

/// A small in-memory map whose entries expire after `ttl`, cleared early by LISTEN/NOTIFY
/// invalidations (see ``CacheInvalidator``). The TTL bounds staleness if a notification is
/// ever missed. Lookups take a mutex, never an actor hop: they sit on the sign-in hot path.
/// `now` is the clock entries expire by (tests advance their own instead of sleeping).
package final class ExpiringCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct Entry {
        package let value: Value
        package let expires: ContinuousClock.Instant
    }

    private let entries = Mutex<[Key: Entry]>([:])
    package let ttl: Duration
    package let capacity: Int
    package let now: @Sendable () -> ContinuousClock.Instant

    package init(ttl: Duration, capacity: Int = 10_000, now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }) {
        self.ttl = ttl
        self.capacity = capacity
        self.now = now
    }

    package func value(for key: Key) -> Value? {
        let instant = now()
        return entries.withLock { entries in
            guard let entry = entries[key] else { return nil }
            guard entry.expires > instant else {
                entries[key] = nil
                return nil
            }
            return entry.value
        }
    }

    package func set(_ value: Value, for key: Key) {
        let expires = now() + ttl
        entries.withLock { entries in
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[key] = Entry(value: value, expires: expires)
        }
    }

    package func removeAll(where predicate: (Key, Value) -> Bool) {
        entries.withLock { entries in entries = entries.filter { !predicate($0.key, $0.value.value) } }
    }

    package func removeAll() { entries.withLock { $0.removeAll() } }
}

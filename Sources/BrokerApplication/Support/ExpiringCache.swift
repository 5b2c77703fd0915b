import Synchronization

/// A small in-memory map whose entries expire after `ttl`, cleared early by LISTEN/NOTIFY
/// invalidations (see ``CacheInvalidator``). The TTL bounds staleness if a notification is
/// ever missed. Lookups take a mutex, never an actor hop: they sit on the sign-in hot path.
/// `now` is the clock entries expire by (tests advance their own instead of sleeping).
///
/// A value read from the database while an invalidation arrives must not be stored after it:
/// it may predate the change, and would then outlive the notice that was meant to clear it.
/// So a reader takes ``generation`` before it reads and stores with
/// ``set(_:for:unlessClearedSince:)``; every removal moves the generation on.
package final class ExpiringCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct Entry {
        package let value: Value
        package let expires: ContinuousClock.Instant
    }

    private struct State {
        var entries: [Key: Entry] = [:]
        /// Moves on at every removal, whether or not it removed anything.
        var generation: UInt64 = 0
    }

    private let state = Mutex(State())
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
        return state.withLock { state in
            guard let entry = state.entries[key] else { return nil }
            guard entry.expires > instant else {
                state.entries[key] = nil
                return nil
            }
            return entry.value
        }
    }

    /// Whether an entry for `key` is stored, expired or not: what a removal takes away (tests of
    /// invalidations, which must not depend on how long a loaded machine takes to reach them).
    package func holds(_ key: Key) -> Bool { state.withLock { $0.entries[key] != nil } }

    /// The cached value for `key`, or what `read` returns, stored unless a removal came while it
    /// read (``set(_:for:unlessClearedSince:)``).
    package func value(for key: Key, orRead read: () async throws -> Value) async rethrows -> Value {
        if let cached = value(for: key) { return cached }
        let generation = self.generation
        let found = try await read()
        set(found, for: key, unlessClearedSince: generation)
        return found
    }

    /// Where removals stand: take it before reading what will be stored.
    package var generation: UInt64 { state.withLock { $0.generation } }

    package func set(_ value: Value, for key: Key) {
        let expires = now() + ttl
        state.withLock { state in Self.store(value, for: key, expires: expires, capacity: capacity, in: &state) }
    }

    /// Stores `value` only if nothing was removed since `generation` was taken; returns whether
    /// it did. A value read before an invalidation is then used once and never cached.
    @discardableResult
    package func set(_ value: Value, for key: Key, unlessClearedSince generation: UInt64) -> Bool {
        let expires = now() + ttl
        return state.withLock { state in
            guard state.generation == generation else { return false }
            Self.store(value, for: key, expires: expires, capacity: capacity, in: &state)
            return true
        }
    }

    package func removeAll(where predicate: (Key, Value) -> Bool) {
        state.withLock { state in
            state.generation &+= 1
            state.entries = state.entries.filter { !predicate($0.key, $0.value.value) }
        }
    }

    package func removeAll() {
        state.withLock { state in
            state.generation &+= 1
            state.entries.removeAll()
        }
    }

    private static func store(_ value: Value, for key: Key, expires: ContinuousClock.Instant, capacity: Int, in state: inout State) {
        if state.entries.count >= capacity { state.entries.removeAll(keepingCapacity: true) }
        state.entries[key] = Entry(value: value, expires: expires)
    }
}

import Foundation
import Synchronization

/// Which identities this process has signed in. A returning sign-in of such an identity
/// probably brings nothing new and takes the quiet path, so ``AccountRepository`` tries the
/// lean quiet statement first; for anyone else that would be a wasted round trip (a new user
/// always misses it). It is only a hint: the statement re-checks every condition in the
/// database and the full statement follows when it finds nothing. Other broker processes or a
/// dropped entry cost at most one extra statement, never a wrong answer.
///
/// Each identity is kept as the 64-bit hash of its key (Swift's `Hasher`, seeded per process):
/// two keys that share a hash only send a new user to the lean statement first, which finds
/// nothing and costs one round trip, never a wrong answer. Two generations of at most
/// ``capacity`` entries each: lookups read both, and when the newer one is full the older one
/// is dropped. With the default capacity a process remembers the last 500,000 to 1,000,000
/// identities it signed in, in at most 16 MiB (8 bytes an entry in a table sized for
/// ``capacity``; decision 0022).
final class RecentSignIns: Sendable {
    struct Key: Hashable, Sendable {
        let tenantID: UUID
        let provider: String
        let providerScope: String
        let subject: String
    }

    private struct Generations {
        var current: Set<Int>
        var previous: Set<Int> = []
    }

    let capacity: Int
    private let generations: Mutex<Generations>

    /// A capacity of 0 keeps nothing: every sign-in runs the full statement.
    init(capacity: Int = 500_000) {
        self.capacity = capacity
        generations = Mutex(Generations(current: []))
    }

    func contains(_ key: Key) -> Bool {
        let hash = key.hashValue
        return generations.withLock { $0.current.contains(hash) || $0.previous.contains(hash) }
    }

    /// Notes that the identity signed in through this process.
    func record(_ key: Key) {
        guard capacity > 0 else { return }
        let hash = key.hashValue
        generations.withLock { generations in
            guard !generations.current.contains(hash) else { return }
            if generations.current.count >= capacity {
                generations.previous = generations.current
                // Sized once for the whole generation: no rehash while it fills.
                generations.current = Set(minimumCapacity: capacity)
            }
            generations.current.insert(hash)
        }
    }

    var count: Int { generations.withLock { $0.current.count + $0.previous.count } }
}

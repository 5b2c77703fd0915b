import Foundation
import Synchronization

/// Which identities this process has signed in. A returning sign-in of such an identity
/// probably brings nothing new and takes the quiet path, so ``AccountRepository`` tries the
/// lean quiet statement first; for anyone else that would be a wasted round trip (a new user
/// always misses it). It is only a hint: the statement re-checks every condition in the
/// database and the full statement follows when it finds nothing. Other broker processes or a
/// dropped entry cost at most one extra statement, never a wrong answer.
///
/// Two generations of at most ``capacity`` entries each: lookups read both, and when the newer
/// one is full the older one is dropped. Memory stays bounded by twice the capacity (a key is
/// about 150 bytes).
final class RecentSignIns: Sendable {
    struct Key: Hashable, Sendable {
        let tenantID: UUID
        let provider: String
        let providerScope: String
        let subject: String
    }

    private struct Generations {
        var current: Set<Key> = []
        var previous: Set<Key> = []
    }

    let capacity: Int
    private let generations = Mutex(Generations())

    /// A capacity of 0 keeps nothing: every sign-in runs the full statement.
    init(capacity: Int = 50_000) {
        self.capacity = capacity
    }

    func contains(_ key: Key) -> Bool {
        generations.withLock { $0.current.contains(key) || $0.previous.contains(key) }
    }

    /// Notes that the identity signed in through this process.
    func record(_ key: Key) {
        guard capacity > 0 else { return }
        generations.withLock { generations in
            guard !generations.current.contains(key) else { return }
            if generations.current.count >= capacity {
                generations.previous = generations.current
                generations.current = []
            }
            generations.current.insert(key)
        }
    }

    var count: Int { generations.withLock { $0.current.count + $0.previous.count } }
}

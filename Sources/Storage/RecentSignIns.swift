import Foundation
import Synchronization

/// Which identities had their sign-in stamp (`last_sign_in_at`) written recently, as this
/// process saw it. A returning sign-in of such an identity probably takes the quiet path, so
/// ``AccountRepository`` tries the lean quiet statement first. It is only a hint: the
/// statement re-checks every condition in the database and the full statement follows when it
/// finds nothing. Other broker processes, clock skew or a lost entry cost at most one extra
/// round trip, never a wrong answer.
///
/// Two generations of entries, each at most ``window`` old and ``capacity`` large: lookups read
/// both, the older generation is dropped when the newer one is a window old or full. Memory
/// stays bounded by the identities signing in within about two windows.
final class RecentSignIns: Sendable {
    struct Key: Hashable, Sendable {
        let tenantID: UUID
        let provider: String
        let providerScope: String
        let subject: String
    }

    private struct Generations {
        var current: [Key: Date] = [:]
        var previous: [Key: Date] = [:]
        var currentSince: Date
    }

    /// How old a stamp may be for the quiet statement to be worth trying first: the quiet
    /// interval less a margin for the broker's clock running ahead of the database's.
    let window: TimeInterval
    let capacity: Int
    private let generations: Mutex<Generations>

    init(window: TimeInterval, capacity: Int = 50_000, now: Date = Date()) {
        self.window = window
        self.capacity = capacity
        self.generations = Mutex(Generations(currentSince: now))
    }

    /// Whether the identity's stamp was written within the window before `now`.
    func isRecent(_ key: Key, now: Date = Date()) -> Bool {
        generations.withLock { generations in
            guard let stamp = generations.current[key] ?? generations.previous[key] else { return false }
            return now.timeIntervalSince(stamp) < window
        }
    }

    /// Notes the identity's stamp as the database returned it.
    func record(_ key: Key, stampedAt stamp: Date, now: Date = Date()) {
        guard now.timeIntervalSince(stamp) < window else { return }
        generations.withLock { generations in
            if generations.current.count >= capacity || now.timeIntervalSince(generations.currentSince) >= window {
                generations.previous = generations.current
                generations.current = [:]
                generations.currentSince = now
            }
            generations.current[key] = stamp
        }
    }

    var count: Int { generations.withLock { $0.current.count + $0.previous.count } }
}

import Synchronization
import TestSupport
import Testing

@testable import BrokerApplication

/// ``ExpiringCache`` on a test clock: expiry without sleeping.
@Suite struct ExpiringCacheTests {
    @Test func anEntryLivesForItsTTLAndNotAnInstantLonger() {
        let clock = AdvancingClock()
        let cache = ExpiringCache<String, Int>(ttl: .seconds(5), now: clock.reader)
        cache.set(1, for: "a")
        #expect(cache.value(for: "a") == 1)
        clock.advance(by: .seconds(5) - .nanoseconds(1))
        #expect(cache.value(for: "a") == 1)
        clock.advance(by: .nanoseconds(1))
        #expect(cache.value(for: "a") == nil, "expired at its TTL")
    }

    @Test func settingAgainRestartsTheTTL() {
        let clock = AdvancingClock()
        let cache = ExpiringCache<String, Int>(ttl: .seconds(5), now: clock.reader)
        cache.set(1, for: "a")
        clock.advance(by: .seconds(4))
        cache.set(2, for: "a")
        clock.advance(by: .seconds(4))
        #expect(cache.value(for: "a") == 2)
        clock.advance(by: .seconds(1))
        #expect(cache.value(for: "a") == nil)
    }

    @Test func eachEntryExpiresOnItsOwn() {
        let clock = AdvancingClock()
        let cache = ExpiringCache<String, Int>(ttl: .seconds(5), now: clock.reader)
        cache.set(1, for: "early")
        clock.advance(by: .seconds(3))
        cache.set(2, for: "late")
        clock.advance(by: .seconds(2))
        #expect(cache.value(for: "early") == nil)
        #expect(cache.value(for: "late") == 2)
        clock.advance(by: .seconds(3))
        #expect(cache.value(for: "late") == nil)
    }

    @Test func removeAllClearsBeforeTheTTL() {
        let clock = AdvancingClock()
        let cache = ExpiringCache<String, Int>(ttl: .seconds(60), now: clock.reader)
        cache.set(1, for: "a")
        cache.set(2, for: "b")
        cache.removeAll()
        #expect(cache.value(for: "a") == nil && cache.value(for: "b") == nil)
        cache.set(3, for: "a")
        #expect(cache.value(for: "a") == 3, "the cache is usable after clearing")
    }

    @Test func removeAllWhereClearsOnlyWhatMatches() {
        let clock = AdvancingClock()
        let cache = ExpiringCache<String, Int>(ttl: .seconds(60), now: clock.reader)
        for (key, value) in [("a", 1), ("b", 2), ("c", 3)] { cache.set(value, for: key) }
        cache.removeAll { key, value in key == "a" || value == 3 }
        #expect(cache.value(for: "a") == nil)
        #expect(cache.value(for: "b") == 2)
        #expect(cache.value(for: "c") == nil)
        clock.advance(by: .seconds(60))
        #expect(cache.value(for: "b") == nil)
    }

    /// A value read from the database while an invalidation arrived may predate the change: it is
    /// not stored, or it would outlive the notice meant to clear it (the stale entry a
    /// LoginOptionsTests run once met for the full TTL).
    @Test func aValueReadAcrossARemovalIsNotStored() {
        let cache = ExpiringCache<String, Int>(ttl: .seconds(60))
        let before = cache.generation
        cache.removeAll { key, _ in key == "other" }  // matches nothing, still a notice
        #expect(cache.set(1, for: "a", unlessClearedSince: before) == false)
        #expect(cache.value(for: "a") == nil)

        let beforeAll = cache.generation
        cache.removeAll()
        #expect(cache.set(1, for: "a", unlessClearedSince: beforeAll) == false)
        #expect(cache.value(for: "a") == nil)

        let quiet = cache.generation
        cache.set(2, for: "b")
        #expect(cache.value(for: "a") == nil)
        #expect(cache.set(1, for: "a", unlessClearedSince: quiet), "storing and expiring are no notice")
        #expect(cache.value(for: "a") == 1)
    }

    @Test func aFullCacheStartsOver() {
        let clock = AdvancingClock()
        let cache = ExpiringCache<Int, Int>(ttl: .seconds(60), capacity: 3, now: clock.reader)
        for key in 0..<3 { cache.set(key, for: key) }
        #expect((0..<3).allSatisfy { cache.value(for: $0) == $0 })
        cache.set(3, for: 3)
        #expect((0..<3).allSatisfy { cache.value(for: $0) == nil })
        #expect(cache.value(for: 3) == 3)
    }

    @Test func theDefaultClockIsTheContinuousClock() {
        let cache = ExpiringCache<String, Int>(ttl: .seconds(60))
        let before = ContinuousClock.now
        let read = cache.now()
        #expect(read >= before && read <= ContinuousClock.now)
        cache.set(1, for: "a")
        #expect(cache.value(for: "a") == 1)
    }

    /// `value(for:orRead:)` reads once and keeps it; a read that a removal overtook answers its
    /// caller and is not kept.
    @Test func aReadIsKeptUnlessARemovalOvertookIt() async {
        let cache = ExpiringCache<String, Int>(ttl: .seconds(60))
        #expect(await cache.value(for: "a") { 1 } == 1)
        #expect(await cache.value(for: "a") { 2 } == 1, "kept: not read again")
        #expect(
            await cache.value(for: "b") {
                cache.removeAll(); return 3
            } == 3)
        #expect(cache.value(for: "b") == nil, "a removal came while it read")
    }
}

import Foundation
import Testing

@testable import BrokerApplication

/// The sampler alone (issue 20 §6): one row per bucket per window with the count left out,
/// memory bounded whatever arrives, counts of silent buckets written when they are pruned.
@Suite struct SecurityEventSamplerTests {
    typealias Sampler = SecurityEventSampler

    let start = ContinuousClock.now

    func key(_ reason: String, _ scope: Sampler.Scope) -> Sampler.Key {
        Sampler.Key(action: "api_key.refused", reason: reason, scope: scope)
    }

    @Test func oneRowPerWindowCountingTheRest() {
        var sampler = Sampler(window: .seconds(10), maxBuckets: 16)
        let tenant = UUID()
        let replay = Sampler.Key(action: "sign_in.token_replayed", reason: "token_replayed", scope: .tenant(tenant))
        var rows: [Sampler.Row] = []
        for step in 0..<2_000 {
            let (row, pruned) = sampler.admit(replay, subject: .init(tenantID: tenant, target: "c"), at: start + .milliseconds(step))
            rows += [row].compactMap { $0 } + pruned
        }
        #expect(rows.count == 1)
        #expect(rows.first?.notRecordedBefore == 0)
        let (next, _) = sampler.admit(replay, subject: .init(tenantID: tenant, target: "c"), at: start + .seconds(12))
        #expect(next?.notRecordedBefore == 1_999)
    }

    /// Distinct junk prefixes share one bucket per reason; keys that exist get buckets of their
    /// own up to the bound, then an overflow bucket; the table never grows past it.
    @Test func memoryIsBoundedWhateverArrives() {
        var sampler = Sampler(window: .seconds(10), maxBuckets: 8)
        for index in 0..<10_000 {
            _ = sampler.admit(key("invalid_api_key", .anonymous), subject: .init(tenantID: nil, target: "ibk_\(index)"), at: start)
            _ = sampler.admit(key("malformed_api_key", .anonymous), subject: .init(tenantID: nil, target: nil), at: start)
        }
        #expect(sampler.buckets.count == 2)
        var written = 0
        for _ in 0..<100 {
            let (row, _) = sampler.admit(key("api_key_revoked", .key(UUID())), subject: .init(tenantID: UUID(), target: "ibk_x"), at: start)
            if row != nil { written += 1 }
        }
        #expect(sampler.buckets.count == 9, "8 buckets and the overflow bucket of one reason")
        #expect(written == 7, "six keys of their own, then one overflow row for the rest of the window")
        #expect(sampler.buckets.keys.contains { $0.scope == .overflow })
    }

    /// A bucket that falls silent after leaving events out is handed back, with its count, when
    /// it is pruned (once a window); nothing lingers after.
    @Test func silentBucketsArePrunedWithTheirCount() {
        var sampler = Sampler(window: .seconds(10), maxBuckets: 64)
        let revoked = key("api_key_revoked", .key(UUID()))
        _ = sampler.admit(revoked, subject: .init(tenantID: UUID(), target: "ibk_AAAAAAAA"), at: start)
        _ = sampler.admit(revoked, subject: .init(tenantID: nil, target: "ibk_AAAAAAAA"), at: start + .seconds(1))
        _ = sampler.admit(revoked, subject: .init(tenantID: nil, target: "ibk_AAAAAAAA"), at: start + .seconds(2))
        let (row, pruned) = sampler.admit(
            key("missing_api_key", .anonymous), subject: .init(tenantID: nil, target: nil), at: start + .seconds(11))
        #expect(row?.notRecordedBefore == 0)
        #expect(pruned.count == 1)
        #expect(pruned.first?.key == revoked && pruned.first?.notRecordedBefore == 2 && pruned.first?.trailing == true)
        #expect(pruned.first?.subject.target == "ibk_AAAAAAAA")
        #expect(sampler.buckets.count == 1)
    }
}

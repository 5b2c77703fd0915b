import BrokerCore
import Foundation
import Testing

@Suite struct SecureRandomTests {
    @Test(arguments: [1, 7, 16, 32, 80, 255, 256, 257, 4_096])
    func fillsExactlyTheCountAsked(_ count: Int) {
        let bytes = SecureRandom.bytes(count)
        #expect(bytes.count == count)
    }

    @Test func callsDifferAndBytesSpread() {
        let samples = (0..<400).map { _ in SecureRandom.bytes(32) }  // across refills of the pool
        #expect(Set(samples).count == samples.count)
        // 12,800 bytes: every byte value is expected ~50 times; all 256 should show up.
        #expect(Set(samples.joined()).count == 256)
    }

    @Test func blockServedRequestsNeverRepeatOrComeOutZeroed() {
        // 100-byte requests cross the 4 KiB block's end at varying offsets (the rest of a block
        // too small for a request is skipped, never handed out twice).
        let samples = (0..<300).map { _ in SecureRandom.bytes(100) }
        #expect(Set(samples).count == samples.count)
        let chunks = samples.flatMap { sample in stride(from: 0, to: 96, by: 16).map { Array(sample[$0..<($0 + 16)]) } }
        #expect(Set(chunks).count == chunks.count)
        #expect(!chunks.contains([UInt8](repeating: 0, count: 16)))
    }

    @Test func refreshTokensCarry256RandomBits() {
        let session = UUID()
        let tokens = (0..<100).map { _ in RefreshToken.generate(sessionID: session).value }
        #expect(Set(tokens).count == tokens.count)
        #expect(tokens.allSatisfy { $0.hasPrefix("ibr_") && $0.utf8.count == 68 && RefreshToken(parsing: $0)?.sessionID == session })
    }
}

@Suite struct RandomUUIDTests {
    @Test func versionFourRFC4122AndDistinct() {
        let ids = (0..<1_000).map { _ in UUID.random() }
        #expect(Set(ids).count == ids.count)
        for id in ids {
            let text = id.uuidString.lowercased()
            let characters = Array(text)
            #expect(characters[14] == "4")
            #expect("89ab".contains(characters[19]))
        }
    }
}

@Suite struct TimeOrderedUUIDTests {
    @Test func versionSevenVariantAndTheMillisecondsUpFront() {
        let date = Date(timeIntervalSince1970: 1_795_543_684.5)
        let id = UUID.timeOrdered(at: date)
        let text = id.uuidString.lowercased()
        // 1,795,543,684,500 ms = 0x01a2 0ebe 5594
        #expect(text.hasPrefix("01a20ebe-5594-7"))
        #expect("89ab".contains(Array(text)[19]))
    }

    @Test func laterIdsSortAfterEarlierOnesByteForByteAndIdsOfOneMillisecondDiffer() {
        let start = Date(timeIntervalSince1970: 1_795_543_684)
        let ids = (0..<200).map { UUID.timeOrdered(at: start.addingTimeInterval(Double($0) * 0.002 + 0.0005)) }
        let bytes = ids.map { id in withUnsafeBytes(of: id.uuid) { Array($0) } }
        #expect(zip(bytes, bytes.dropFirst()).allSatisfy { $0.lexicographicallyPrecedes($1) })
        let sameMillisecond = (0..<500).map { _ in UUID.timeOrdered(at: start) }
        #expect(Set(sameMillisecond).count == sameMillisecond.count)
    }

    @Test func datesOutsideFortyEightBitsOfMillisecondsTakeTheNearestEnd() {
        #expect(UUID.timeOrdered(at: Date(timeIntervalSince1970: -5)).uuidString.lowercased().hasPrefix("00000000-0000-7"))
        for far in [Date(timeIntervalSince1970: 1e15), Date(timeIntervalSince1970: 1e300)] {
            #expect(UUID.timeOrdered(at: far).uuidString.lowercased().hasPrefix("ffffffff-ffff-7"))
        }
    }

    @Test func aSessionIdDerivedFromAReplayKeyIsTheSameEachTimeAndOrderedByTheTokensIssueTime() {
        let issued = Date(timeIntervalSince1970: 1_795_543_684)
        let key = Data((0..<32).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) })
        var first = NewSession(id: .random(), refreshTokenHash: Data(), expiresAt: issued, refreshTokenExpiresAt: issued)
        var second = first
        second.id = .random()
        first.identify(byReplayKey: key, issuedAt: issued)
        second.identify(byReplayKey: key, issuedAt: issued)
        #expect(first.id == second.id)
        let text = first.id.uuidString.lowercased()
        #expect(text.hasPrefix("01a20ebe-53a0-7"))  // 1,795,543,684,000 ms
        // The 74 bits after the time come from the key: another key, another id.
        var other = first
        other.identify(byReplayKey: Data(key.reversed()), issuedAt: issued)
        #expect(other.id != first.id)
        var later = first
        later.identify(byReplayKey: Data(key.reversed()), issuedAt: issued.addingTimeInterval(1))
        #expect(
            withUnsafeBytes(of: first.id.uuid) { Array($0) }.lexicographicallyPrecedes(withUnsafeBytes(of: later.id.uuid) { Array($0) }))
    }
}

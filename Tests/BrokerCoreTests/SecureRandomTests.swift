import BrokerCore
import Foundation
import Testing

@Suite struct SecureRandomTests {
    @Test(arguments: [1, 7, 16, 32, 80, 4_096])
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

    @Test func refreshTokensCarry256RandomBits() {
        let tokens = (0..<100).map { _ in RefreshToken.generate().value }
        #expect(Set(tokens).count == tokens.count)
        #expect(tokens.allSatisfy { $0.hasPrefix("ibr_") && $0.utf8.count == 47 && RefreshToken(parsing: $0) != nil })
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

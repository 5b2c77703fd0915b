import BrokerCore
import Foundation
import Testing

@Suite struct FormattingTests {
    @Test func lowercasedStringMatchesFoundation() {
        for _ in 0..<1_000 {
            let id = UUID()
            #expect(id.lowercasedString == id.uuidString.lowercased())
        }
        #expect(UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)).lowercasedString == "00000000-0000-0000-0000-000000000000")
    }

    @Test(arguments: [
        0, 1, -1, -1.5, 59.999, 86_399.9, 86_400, 951_782_400, 951_868_799, 1_795_237_158.999, 1_795_237_158.5,
        4_102_444_800.9999, -62_135_596_800, 253_402_300_799, -2_208_988_800.25,
    ])
    func iso8601StringMatchesFoundation(_ seconds: Double) {
        let date = Date(timeIntervalSince1970: seconds)
        #expect(date.iso8601String == date.formatted(.iso8601))
    }

    @Test func iso8601StringMatchesFoundationOnRandomDates() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let date = Date(timeIntervalSince1970: Double.random(in: -5_000_000_000...10_000_000_000, using: &generator))
            #expect(date.iso8601String == date.formatted(.iso8601))
        }
    }
}

import BrokerCore
import Foundation
import PropertyBased
import Testing

/// Generated inputs for the comparison and the number conversion that decide what the database
/// will hold (issue 39 A2 and C9).
@Suite struct ExactTextAndUnixTimePropertyTests {
    /// Letters that compose, decompose and fold into one another: `é` and `e` + U+0301, the
    /// Kelvin sign and `K`, the Ångström sign and `Å`, in both forms.
    static let alphabet = ["e", "\u{E9}", "\u{301}", "K", "\u{212A}", "\u{C5}", "A\u{30A}", "\u{212B}", "a"]
    static let text = Gen.int(in: 0...(alphabet.count - 1)).array(of: 0...5).map { $0.map { alphabet[$0] }.joined() }

    @Test func exactTextIsEqualExactlyWhenTheBytesAre() async {
        await propertyCheck(count: 2_000, input: Self.text, Self.text) { a, b in
            let same = Array(a.utf8) == Array(b.utf8)
            #expect((ExactText(a) == ExactText(b)) == same, "\(Array(a.unicodeScalars)) \(Array(b.unicodeScalars))")
            if same { #expect(ExactText(a).hashValue == ExactText(b).hashValue) }
            #expect([a].containsExactly(b) == same)
            // The set keeps as many members as the database's unique index would.
            #expect(Set([ExactText(a), ExactText(b)]).count == (same ? 1 : 2))
        }
    }

    @Test func theTwoFormsOfOneNameAreTwoExactTexts() {
        #expect("jos\u{E9}" == "jose\u{301}")
        #expect(ExactText("jos\u{E9}") != ExactText("jose\u{301}"))
        #expect(ExactText("\u{212A}") != ExactText("K"))
    }

    /// Seconds from anywhere a `Double` reaches: an instant exactly inside years 0001 to 9999,
    /// which writes as a 20-character ISO 8601 text and converts to microseconds and back.
    @Test func secondsAreAnInstantExactlyInsideTheYearsPostgreSQLStores() async {
        let anywhere = Gen.double(in: -1e300...1e300)
        let near = Gen.double(in: (UnixTime.earliest - 1e6)...(UnixTime.latest + 1e6))
        for input in [anywhere, near] {
            await propertyCheck(count: 2_000, input: input) { seconds in
                let date = UnixTime.date(seconds: seconds)
                #expect((date != nil) == (seconds >= UnixTime.earliest && seconds <= UnixTime.latest), "\(seconds)")
                guard let date else { return }
                #expect(date.iso8601String.utf8.count == 20)
                let micros = UnixTime.microseconds(date)
                #expect(abs(Double(micros) / 1_000_000 - seconds) <= max(1e-6, abs(seconds) * 1e-15))
            }
        }
    }

    @Test func millisecondsOfAnyMagnitudeNeverTrap() async {
        await propertyCheck(count: 2_000, input: Gen.double(in: -1e300...1e300)) { milliseconds in
            let date = UnixTime.date(milliseconds: milliseconds)
            #expect((date != nil) == (milliseconds / 1_000 >= UnixTime.earliest && milliseconds / 1_000 <= UnixTime.latest))
            _ = UnixTime.microseconds(Date(timeIntervalSince1970: milliseconds))
        }
        #expect(UnixTime.date(milliseconds: 1.8e18) == nil, "nanoseconds sent as milliseconds")
        #expect(UnixTime.date(milliseconds: .infinity) == nil && UnixTime.date(milliseconds: .nan) == nil)
        #expect(UnixTime.date(milliseconds: 1_764_633_600_000) == Date(timeIntervalSince1970: 1_764_633_600))
        #expect(UnixTime.microseconds(Date(timeIntervalSince1970: 1e300)) == Int((UnixTime.latest * 1_000_000).rounded(.towardZero)))
    }

    /// Text bounded by characters is bounded in scalars too: one letter with 5,000 combining
    /// marks is cut, not stored whole (issue 39 F20); what fits is kept as it is.
    @Test func boundedTextIsBoundedInScalarsAndCutBetweenCharacters() async {
        let pieces = ["a", "\u{301}", "\u{302}\u{303}", "\u{E9}", "\u{1F468}\u{200D}\u{1F469}", " "]
        let text = Gen.int(in: 0...(pieces.count - 1)).array(of: 0...400).map { $0.map { pieces[$0] }.joined() }
        await propertyCheck(count: 500, input: text, Gen.int(in: 1...50)) { text, limit in
            let cut = FreeText.prefix(text, characters: limit)
            #expect(text.unicodeScalars.starts(with: cut.unicodeScalars))
            #expect(cut.count <= limit && cut.unicodeScalars.count <= limit * 3)
            #expect(FreeText.fits(cut, characters: limit))
            if FreeText.fits(text, characters: limit) { #expect(cut == text) }
        }
        let marked = "a" + String(repeating: "\u{301}", count: 5_000)
        #expect(FreeText.prefix(marked, characters: 200).unicodeScalars.count <= 600)
        #expect(ProviderIdentity.clean(marked).map { $0.unicodeScalars.count <= 600 } ?? true)
        #expect(!FreeText.fits(marked, characters: 200))
    }
}

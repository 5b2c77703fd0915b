import BrokerCore
import Foundation
import Testing

/// The free-text rule (issue 20 §8): which characters are forbidden, the refusal that names the
/// option, cleaning names from apps and providers, and escaping for output.
@Suite struct FreeTextTests {
    @Test func forbiddenCharacters() throws {
        for value in Array(0x00...0x1F) + Array(0x7F...0x9F) + Array(0x202A...0x202E) + Array(0x2066...0x2069) + [0x2028, 0x2029] {
            let scalar = try #require(Unicode.Scalar(UInt32(value)))
            #expect(FreeText.isForbidden(scalar), "U+\(String(value, radix: 16))")
        }
        for allowed in ["a", " ", "é", "€", "\u{200D}", "\u{2027}", "\u{202F}", "\u{2065}", "\u{206A}", "😀", "漢"] {
            #expect(allowed.unicodeScalars.allSatisfy { !FreeText.isForbidden($0) }, "\(allowed)")
        }
    }

    @Test func operatorTextIsRefusedNamingTheOption() {
        #expect(throws: Never.self) { try FreeText.require("Staff app; existing accounts — ok ✓", option: "--note") }
        do {
            try FreeText.require("ab\u{1B}[2J", option: "--note")
            Issue.record("accepted an escape")
        } catch {
            #expect(error.code == "invalid_argument")
            #expect(error.detail.hasPrefix("--note contains a control character (U+001B at position 3)"), "\(error.detail)")
            // A meaning for the edges to word: no CLI wording in the domain.
            #expect(error.hint == nil)
            #expect(error.arguments == ["rule": "free_text", "option": "--note"])
        }
        #expect(throws: FreeText.ForbiddenCharacter(scalar: "\n", offset: 1)) { try FreeText.check("a\nb") }
    }

    @Test func namesFromAppsAreCleanedNotRefused() {
        #expect(FreeText.sanitized("Grace") == "Grace")
        #expect(FreeText.sanitized("Gr\u{1B}[2Jace\nHop\tper\u{202E}") == "Gr[2Jace Hop per")
        let identity = ProviderIdentity(
            provider: .apple, providerScope: "TEAM", subject: "s", email: nil, emailVerified: false, isPrivateEmail: false,
            name: PersonName(givenName: "\u{1B}[31mAnn\n", familyName: "\u{7}\u{202E}"))
        #expect(identity.name.givenName == "[31mAnn")
        #expect(identity.name.familyName == nil)
    }

    @Test func outputEscapesWhatItPrints() {
        #expect(FreeText.escaped("plain é") == "plain é")
        #expect(FreeText.escaped("a\nb\r\tc\u{1B}[2J\u{202E}\u{0}") == "a\\nb\\r\\tc\\u{1B}[2J\\u{202E}\\u{0}")
        #expect(!FreeText.escaped("x\u{2029}y").unicodeScalars.contains { FreeText.isForbidden($0) })
    }
}

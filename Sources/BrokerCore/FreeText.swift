/// The one rule for free text the broker stores and prints again (issue 20 §8): operators' notes
/// and names, names that apps and providers send. Text that can move a terminal's cursor, clear
/// its screen, start a new line or reorder what follows could make `broker policy check`, `audit
/// list` or a log show rows nobody wrote. Forbidden: the control characters (general category
/// Cc: U+0000–U+001F, U+007F–U+009F), the bidirectional embeddings, overrides and isolates
/// (U+202A–U+202E, U+2066–U+2069) and the line and paragraph separators (U+2028, U+2029).
///
/// Operators' text is refused (``require(_:option:hint:)``): they can retype it. Text from apps
/// and providers (a person's name) is cleaned instead (``sanitized(_:)``): refusing would lock
/// the person out for what their device sent. Output escapes (``escaped(_:)``) what it prints, so
/// rows stored before the rule cannot forge output either.
public enum FreeText {
    /// The longest prefix of `text` of at most `characters` characters and `3 × characters`
    /// Unicode scalars, cut between characters. Counted in characters alone, one letter with
    /// 5,000 combining marks was one character and was stored whole (issue 39 F20).
    public static func prefix(_ text: String, characters: Int) -> String {
        let maxScalars = characters * 3
        var scalars = 0
        var end = text.startIndex
        var count = 0
        for character in text {
            let size = character.unicodeScalars.count
            guard count < characters, scalars + size <= maxScalars else { break }
            scalars += size
            count += 1
            end = text.index(after: end)
        }
        return String(text[..<end])
    }

    /// Whether `text` is at most `characters` characters and `3 × characters` Unicode scalars.
    public static func fits(_ text: String, characters: Int) -> Bool {
        text.unicodeScalars.count <= characters * 3 && text.count <= characters
    }

    /// Whether `scalar` may not appear in free text.
    @inlinable
    public static func isForbidden(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: true
        case 0x202A...0x202E, 0x2066...0x2069: true
        case 0x2028, 0x2029: true
        default: false
        }
    }

    /// A forbidden character in free text: which one, and where (counted in Unicode scalars from 0).
    public struct ForbiddenCharacter: Error, Sendable, Equatable {
        public let scalar: Unicode.Scalar
        public let offset: Int

        public init(scalar: Unicode.Scalar, offset: Int) {
            self.scalar = scalar
            self.offset = offset
        }

        /// `U+001B`.
        public var codePoint: String { FreeText.codePoint(scalar) }
    }

    /// Throws the first forbidden character of `text`.
    public static func check(_ text: String) throws(ForbiddenCharacter) {
        for (offset, scalar) in text.unicodeScalars.enumerated() where isForbidden(scalar) {
            throw ForbiddenCharacter(scalar: scalar, offset: offset)
        }
    }

    /// Operator input: refuses text with a forbidden character, naming the option (`--note`) or
    /// member it came from.
    public static func require(_ text: String, option: String, hint: String? = nil) throws(BrokerError) {
        do {
            try check(text)
        } catch {
            throw BrokerError.controlCharacter(in: option, codePoint: error.codePoint, offset: error.offset, hint: hint)
        }
    }

    /// Text from apps and providers: every forbidden character dropped, except that line breaks
    /// and tabs become a space (a name typed over two lines stays two words).
    public static func sanitized(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isForbidden) else { return text }
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x09, 0x0A, 0x0D, 0x2028, 0x2029: scalars.append(" ")
            default: if !isForbidden(scalar) { scalars.append(scalar) }
            }
        }
        return String(scalars)
    }

    /// Text for a terminal: every forbidden character written as an escape (`\n`, `\r`, `\t`,
    /// `\u{1B}`), so that what is printed stays on its line and shows what is stored.
    public static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isForbidden) else { return text }
        var result = ""
        result.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            default:
                if isForbidden(scalar) {
                    result += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
                } else {
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return result
    }

    static func codePoint(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }
}

extension BrokerError {
    /// Free text given with a character ``FreeText`` forbids.
    public static func controlCharacter(in option: String, codePoint: String, offset: Int, hint: String? = nil) -> BrokerError {
        .invalidArgument(
            "\(option) contains a control character (\(codePoint) at position \(offset + 1)); free text may not hold control characters, line breaks or bidirectional overrides.",
            hint: hint, rule: "free_text", arguments: ["option": option])
    }
}

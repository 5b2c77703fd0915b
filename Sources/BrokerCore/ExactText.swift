/// Text compared as PostgreSQL compares it: byte for byte in UTF-8.
///
/// Swift's `String` equality is canonical equivalence: `"josé"` written with `é` (NFC) equals
/// `"jose\u{301}"` (NFD), and the Kelvin sign `"\u{212A}"` equals `"K"`. The database keeps
/// such values apart (a unique index, `=` in a query). So a set or dictionary keyed by `String`
/// merges two values that the database stores as two, and in-memory decisions then disagree
/// with the rows (issue 39 A2: an import merged two people). Key by `ExactText` wherever the
/// broker decides in memory what the database would decide by its keys.
public struct ExactText: Hashable, Sendable, CustomStringConvertible {
    public let value: String

    public init(_ value: String) {
        self.value = value
    }

    public static func == (lhs: ExactText, rhs: ExactText) -> Bool {
        lhs.value.utf8.elementsEqual(rhs.value.utf8)
    }

    public func hash(into hasher: inout Hasher) {
        var value = value
        value.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }

    public var description: String { value }
}

extension Sequence where Element == String {
    /// Whether one of the strings is `text` byte for byte (not merely canonically equivalent).
    public func containsExactly(_ text: String) -> Bool {
        contains { $0.utf8.elementsEqual(text.utf8) }
    }
}

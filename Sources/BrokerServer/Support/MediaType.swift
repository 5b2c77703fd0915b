/// What a request's `Content-Type` names (RFC 9110 §8.3.1): its `type/subtype`, compared without
/// regard to case, its parameters and the whitespace around it left out. One place for every route
/// that reads a body, read on the header's bytes: Foundation's `trimmingCharacters(in:)` and
/// `lowercased()` took 2 % of a token request's CPU (a profile of token exchange, 2026-12-05).
enum MediaType {
    static let json = "application/json"
    static let form = "application/x-www-form-urlencoded"

    /// Whether `contentType` names `expected` (written in lowercase).
    static func names(_ contentType: String?, _ expected: String) -> Bool {
        guard let contentType else { return false }
        let essence = essence(of: contentType)
        return essence.count == expected.utf8.count && zip(essence, expected.utf8).allSatisfy { lowercased($0) == $1 }
    }

    /// `application/json` or any `+json` media type (RFC 6839).
    static func isJSON(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        if names(contentType, json) { return true }
        let essence = essence(of: contentType)
        return essence.count >= 5 && zip(essence.suffix(5), "+json".utf8).allSatisfy { lowercased($0) == $1 }
    }

    /// The bytes before the first `;`, without the spaces and tabs around them (HTTP's optional
    /// whitespace).
    private static func essence(of contentType: String) -> ArraySlice<UInt8> {
        let bytes = Array(contentType.utf8.prefix { $0 != UInt8(ascii: ";") })
        let isSpace = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        guard let first = bytes.firstIndex(where: { !isSpace($0) }), let last = bytes.lastIndex(where: { !isSpace($0) }) else {
            return []
        }
        return bytes[first...last]
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
    }
}

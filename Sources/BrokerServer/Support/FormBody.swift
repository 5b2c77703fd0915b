import Hummingbird
import HummingbirdCore

/// An `application/x-www-form-urlencoded` body (or a query written the same way): its name and
/// value pairs in order, repeats kept, percent-decoded by Hummingbird's query parser. A form
/// writes a space as `+`, which a query leaves alone, so every `+` byte becomes a space first (a
/// `+` the form meant arrives as `%2B`). Read byte by byte: Foundation's `replacingOccurrences`
/// took a third of this on a token request's kilobyte of form.
enum FormBody {
    static func pairs(_ bytes: some Collection<UInt8>) -> [(String, String)] {
        var text: [UInt8] = [UInt8(ascii: "/"), UInt8(ascii: "?")]
        text.reserveCapacity(bytes.count + 2)
        // "/?": the parser reads a path, then the query; nothing in the body is taken for a scheme.
        for byte in bytes { text.append(byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte) }
        return URI(String(decoding: text, as: UTF8.self)).queryParameters.map { (String($0.key), String($0.value)) }
    }

    /// The first value of each name.
    static func firstFields(_ bytes: some Collection<UInt8>) -> [String: String] {
        var fields: [String: String] = [:]
        for (name, value) in pairs(bytes) where fields[name] == nil { fields[name] = value }
        return fields
    }
}

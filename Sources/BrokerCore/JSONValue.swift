import Foundation

/// A parsed JSON value. Numbers are kept as `Double` (timestamps and small integers are exact).
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public var string: String? {
        if case .string(let value) = self { value } else { nil }
    }

    public var number: Double? {
        if case .number(let value) = self { value } else { nil }
    }

    public var object: [String: JSONValue]? {
        if case .object(let value) = self { value } else { nil }
    }

    public var array: [JSONValue]? {
        if case .array(let value) = self { value } else { nil }
    }

    public var isNull: Bool { self == .null }

    /// The number as an `Int` when it is integral and within `range`; nil for anything else (a
    /// fraction, `1e300`, a string, null). Never traps: a value read off the network is
    /// converted with this, not with `Int(_:)`, which traps on a Double that does not fit.
    public func integer(in range: ClosedRange<Int> = Int.min...Int.max) -> Int? {
        guard case .number(let value) = self, let integer = Int(exactly: value), range.contains(integer) else { return nil }
        return integer
    }

    /// The string when it is at most `maxBytes` bytes of UTF-8; nil for anything else.
    public func string(maxBytes: Int) -> String? {
        guard case .string(let value) = self, value.utf8.count <= maxBytes else { return nil }
        return value
    }

    public subscript(member: String) -> JSONValue? { object?[member] }
}

extension JSONValue {
    public struct ParseError: Error, Equatable {
        public let offset: Int
    }

    /// The deepest nesting any parse accepts, whatever `maxDepth` it is given.
    public static let depthLimit = 256

    /// Parses one JSON text (RFC 8259) strictly: nothing after the value but whitespace, at
    /// most `maxDepth` nested containers (never more than ``depthLimit``: the parser recurses
    /// once per level, so a text of 10,000 nested arrays is refused, not a stack overflow), and **no duplicate member names** in any object
    /// (compared after unescaping). Libraries that keep one of two duplicates let an attacker
    /// make two parsers disagree about a claim or a field; here the text is refused.
    public static func parse<Bytes: Collection<UInt8>>(_ text: Bytes, maxDepth: Int = 32) throws(ParseError) -> JSONValue {
        var parser = StrictJSONParser(bytes: Array(text), maxDepth: min(maxDepth, depthLimit))
        parser.skipWhitespace()
        let value = try parser.value(depth: 0)
        parser.skipWhitespace()
        guard parser.index == parser.bytes.count else { throw ParseError(offset: parser.index) }
        return value
    }
}

/// The parser behind ``JSONValue/parse(_:maxDepth:)``, on the bytes.
struct StrictJSONParser {
    let bytes: [UInt8]
    let maxDepth: Int
    var index = 0

    init(bytes: [UInt8], maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    private func failure() -> JSONValue.ParseError { JSONValue.ParseError(offset: index) }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    mutating func value(depth: Int) throws(JSONValue.ParseError) -> JSONValue {
        guard depth < maxDepth, index < bytes.count else { throw failure() }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try object(depth: depth)
        case UInt8(ascii: "["): return try array(depth: depth)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): return try literal("true", .bool(true))
        case UInt8(ascii: "f"): return try literal("false", .bool(false))
        case UInt8(ascii: "n"): return try literal("null", .null)
        default: return .number(try number())
        }
    }

    private mutating func literal(_ text: StaticString, _ value: JSONValue) throws(JSONValue.ParseError) -> JSONValue {
        let count = text.utf8CodeUnitCount
        guard bytes.count - index >= count else { throw failure() }
        let matches = text.withUTF8Buffer { expected in bytes[index..<(index + count)].elementsEqual(expected) }
        guard matches else { throw failure() }
        index += count
        return value
    }

    private mutating func object(depth: Int) throws(JSONValue.ParseError) -> JSONValue {
        index += 1
        var members: [String: JSONValue] = [:]
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw failure() }
            let name = try string()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw failure() }
            index += 1
            skipWhitespace()
            let value = try value(depth: depth + 1)
            guard members.updateValue(value, forKey: name) == nil else { throw failure() }
            if try endsAfterItem(closing: UInt8(ascii: "}")) { return .object(members) }
        }
    }

    private mutating func array(depth: Int) throws(JSONValue.ParseError) -> JSONValue {
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try value(depth: depth + 1))
            if try endsAfterItem(closing: UInt8(ascii: "]")) { return .array(elements) }
        }
    }

    /// After a member or element: `,` continues (false), `closing` ends (true), anything else
    /// is malformed.
    private mutating func endsAfterItem(closing: UInt8) throws(JSONValue.ParseError) -> Bool {
        skipWhitespace()
        guard index < bytes.count else { throw failure() }
        switch bytes[index] {
        case UInt8(ascii: ","):
            index += 1
            return false
        case closing:
            index += 1
            return true
        default:
            throw failure()
        }
    }

    /// A string, unescaped. Raw control characters and invalid UTF-8 are refused; `\u`
    /// escapes must form valid scalars (surrogates only in pairs) other than U+0000: no member
    /// of a token or a request carries NUL, and PostgreSQL's text cannot hold it.
    private mutating func string() throws(JSONValue.ParseError) -> String {
        index += 1
        let start = index
        // The common case: no escapes, copied whole.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                defer { index += 1 }
                return try validUTF8(bytes[start..<index])
            }
            if byte == UInt8(ascii: "\\") { break }
            guard byte >= 0x20 else { throw failure() }
            index += 1
        }
        var decoded = Array(bytes[start..<index])
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return try validUTF8(decoded[...])
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw failure() }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(escape)
                case UInt8(ascii: "b"): decoded.append(0x08)
                case UInt8(ascii: "f"): decoded.append(0x0C)
                case UInt8(ascii: "n"): decoded.append(0x0A)
                case UInt8(ascii: "r"): decoded.append(0x0D)
                case UInt8(ascii: "t"): decoded.append(0x09)
                case UInt8(ascii: "u"):
                    var scalarValue = try hex4()
                    if (0xD800...0xDBFF).contains(scalarValue) {
                        guard bytes.count - index >= 6, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                        else { throw failure() }
                        index += 2
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw failure() }
                        scalarValue = 0x10000 + ((scalarValue - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard scalarValue != 0, let scalar = Unicode.Scalar(scalarValue) else { throw failure() }
                    decoded.append(contentsOf: String(Character(scalar)).utf8)
                default:
                    throw failure()
                }
            default:
                guard byte >= 0x20 else { throw failure() }
                decoded.append(byte)
                index += 1
            }
        }
        throw failure()
    }

    private mutating func hex4() throws(JSONValue.ParseError) -> UInt32 {
        guard bytes.count - index >= 4 else { throw failure() }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw failure()
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    /// ASCII, most of what a token or a body holds, is valid UTF-8 as it stands and takes the
    /// standard library's specialized initializer; `String(validating:as:)` is generic and
    /// looks up type metadata at every call (0.7 % of a sign-in's CPU in a profile), so it is
    /// kept for text with other characters.
    private func validUTF8(_ slice: ArraySlice<UInt8>) throws(JSONValue.ParseError) -> String {
        let string: String? = slice.withUnsafeBufferPointer { buffer in
            if !buffer.contains(where: { $0 >= 0x80 }) { return String(decoding: buffer, as: UTF8.self) }
            return String(validating: buffer, as: UTF8.self)
        }
        guard let string else { throw failure() }
        return string
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, checked on the bytes, then
    /// converted by the standard library.
    private mutating func number() throws(JSONValue.ParseError) -> Double {
        let start = index
        func digits(_ parser: inout StrictJSONParser) -> Int {
            let from = parser.index
            while parser.index < parser.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(parser.bytes[parser.index]) {
                parser.index += 1
            }
            return parser.index - from
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
        if index < bytes.count, bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else if digits(&self) == 0 {
            throw failure()
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard digits(&self) > 0 else { throw failure() }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard digits(&self) > 0 else { throw failure() }
        }
        guard let value = Double(String(decoding: bytes[start..<index], as: UTF8.self)), value.isFinite else { throw failure() }
        return value
    }
}

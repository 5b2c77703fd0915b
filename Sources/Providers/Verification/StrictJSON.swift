import Foundation

/// Validates that a JSON text is well-formed with no duplicate member names in any object.
/// JWT libraries (and Foundation) keep one of two duplicate members silently; an attacker can
/// use that to make two parsers disagree about a claim, so tokens with duplicates are refused.
enum StrictJSON {
    struct Failure: Error {}

    static func hasNoDuplicateMembers(_ data: Data) -> Bool {
        var parser = Parser(bytes: Array(data))
        do {
            parser.skipWhitespace()
            try parser.value(depth: 0)
            parser.skipWhitespace()
            return parser.index == parser.bytes.count
        } catch {
            return false
        }
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func value(depth: Int) throws {
            guard depth < 32, index < bytes.count else { throw Failure() }
            switch bytes[index] {
            case UInt8(ascii: "{"): try object(depth: depth)
            case UInt8(ascii: "["): try array(depth: depth)
            case UInt8(ascii: "\""): _ = try string()
            default: try scalar()
            }
        }

        mutating func object(depth: Int) throws {
            index += 1
            var names: Set<ArraySlice<UInt8>> = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return
            }
            while true {
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw Failure() }
                let name = try memberName(try string())
                guard names.insert(name).inserted else { throw Failure() }
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw Failure() }
                index += 1
                skipWhitespace()
                try value(depth: depth + 1)
                if try endsAfterMember(closing: "}") { return }
            }
        }

        mutating func array(depth: Int) throws {
            index += 1
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return
            }
            while true {
                skipWhitespace()
                try value(depth: depth + 1)
                if try endsAfterMember(closing: "]") { return }
            }
        }

        /// After a member or element: `,` continues (false), `closing` ends (true), anything
        /// else is malformed.
        mutating func endsAfterMember(closing: Unicode.Scalar) throws -> Bool {
            skipWhitespace()
            guard index < bytes.count else { throw Failure() }
            switch bytes[index] {
            case UInt8(ascii: ","):
                index += 1
                return false
            case UInt8(ascii: closing):
                index += 1
                return true
            default:
                throw Failure()
            }
        }

        /// A member name as parsers see it, in UTF-8: escapes (`"s\u0075b"`) decoded, so a name
        /// cannot hide its duplicate behind an escape.
        func memberName(_ raw: ArraySlice<UInt8>) throws -> ArraySlice<UInt8> {
            guard raw.contains(UInt8(ascii: "\\")) else { return raw }
            let quoted = Data([UInt8(ascii: "\"")] + raw + [UInt8(ascii: "\"")])
            guard let name = try? JSONSerialization.jsonObject(with: quoted, options: .fragmentsAllowed) as? String else {
                throw Failure()
            }
            return ArraySlice(name.utf8)
        }

        /// A string's raw bytes, without the quotes.
        mutating func string() throws -> ArraySlice<UInt8> {
            index += 1
            let start = index
            while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: "\""):
                    defer { index += 1 }
                    return bytes[start..<index]
                case UInt8(ascii: "\\"): index += 2
                case 0x00..<0x20: throw Failure()
                default: index += 1
                }
            }
            throw Failure()
        }

        /// `true`, `false`, `null` or a number in RFC 8259's grammar, checked on the bytes.
        mutating func scalar() throws {
            let start = index
            scan: while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: ","), UInt8(ascii: "]"), UInt8(ascii: "}"), 0x20, 0x09, 0x0A, 0x0D: break scan
                default: index += 1
                }
            }
            let token = bytes[start..<index]
            guard token.elementsEqual("true".utf8) || token.elementsEqual("false".utf8) || token.elementsEqual("null".utf8)
                || Self.isNumber(token)
            else { throw Failure() }
        }

        /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
        static func isNumber(_ token: ArraySlice<UInt8>) -> Bool {
            var rest = token[...]
            func digits(_ rest: inout ArraySlice<UInt8>) -> Int {
                let count = rest.prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }.count
                rest = rest.dropFirst(count)
                return count
            }
            if rest.first == UInt8(ascii: "-") { rest = rest.dropFirst() }
            if rest.first == UInt8(ascii: "0") {
                rest = rest.dropFirst()
            } else if digits(&rest) == 0 {
                return false
            }
            if rest.first == UInt8(ascii: ".") {
                rest = rest.dropFirst()
                guard digits(&rest) > 0 else { return false }
            }
            if rest.first == UInt8(ascii: "e") || rest.first == UInt8(ascii: "E") {
                rest = rest.dropFirst()
                if rest.first == UInt8(ascii: "+") || rest.first == UInt8(ascii: "-") { rest = rest.dropFirst() }
                guard digits(&rest) > 0 else { return false }
            }
            return rest.isEmpty
        }
    }
}

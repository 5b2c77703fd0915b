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
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
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
            var names: Set<String> = []
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

        /// A member name as parsers see it: escapes (`"s\u0075b"`) decoded, so a name cannot
        /// hide its duplicate behind an escape.
        func memberName(_ raw: [UInt8]) throws -> String {
            guard raw.contains(UInt8(ascii: "\\")) else { return String(decoding: raw, as: UTF8.self) }
            let quoted = Data([UInt8(ascii: "\"")] + raw + [UInt8(ascii: "\"")])
            guard let name = try? JSONSerialization.jsonObject(with: quoted, options: .fragmentsAllowed) as? String else {
                throw Failure()
            }
            return name
        }

        /// A string's raw bytes, without the quotes.
        mutating func string() throws -> [UInt8] {
            index += 1
            let start = index
            while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: "\""):
                    defer { index += 1 }
                    return Array(bytes[start..<index])
                case UInt8(ascii: "\\"): index += 2
                case 0x00..<0x20: throw Failure()
                default: index += 1
                }
            }
            throw Failure()
        }

        mutating func scalar() throws {
            let start = index
            while index < bytes.count, !",]} \t\r\n".utf8.contains(bytes[index]) { index += 1 }
            let token = String(decoding: bytes[start..<index], as: UTF8.self)
            guard ["true", "false", "null"].contains(token) || Double(token) != nil else { throw Failure() }
        }
    }
}

import Foundation

/// Base64url without padding (RFC 4648 §5), as JOSE uses it (RFC 7515 §2). Decoding is
/// canonical: only the URL-safe alphabet, no padding, no whitespace, and the unused low bits
/// of the last character zero, so that one byte string has exactly one text. Anything else is
/// refused: a token that a lenient decoder would accept under several spellings could be
/// replayed or cached under each of them. Byte-level: it runs on every request.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Each byte's 6-bit value, or 0xFF for a byte outside the URL-safe alphabet.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(value) }
        return table
    }()

    public static func encode<D: Collection<UInt8>>(_ bytes: D) -> String {
        let input = Array(bytes)
        var output: [UInt8] = []
        output.reserveCapacity((input.count * 4 + 2) / 3)
        var index = 0
        while index + 3 <= input.count {
            let chunk = UInt32(input[index]) << 16 | UInt32(input[index + 1]) << 8 | UInt32(input[index + 2])
            output.append(alphabet[Int(chunk >> 18 & 63)])
            output.append(alphabet[Int(chunk >> 12 & 63)])
            output.append(alphabet[Int(chunk >> 6 & 63)])
            output.append(alphabet[Int(chunk & 63)])
            index += 3
        }
        switch input.count - index {
        case 1:
            let chunk = UInt32(input[index]) << 16
            output.append(alphabet[Int(chunk >> 18 & 63)])
            output.append(alphabet[Int(chunk >> 12 & 63)])
        case 2:
            let chunk = UInt32(input[index]) << 16 | UInt32(input[index + 1]) << 8
            output.append(alphabet[Int(chunk >> 18 & 63)])
            output.append(alphabet[Int(chunk >> 12 & 63)])
            output.append(alphabet[Int(chunk >> 6 & 63)])
        default:
            break
        }
        return String(decoding: output, as: UTF8.self)
    }

    public static func decode(_ string: String) -> Data? { decode(bytes: string.utf8) }

    /// The bytes of a canonical base64url text, or nil when it is not one.
    public static func decode<Bytes: Collection<UInt8>>(bytes text: Bytes) -> Data? {
        let remainder = text.count % 4
        guard remainder != 1 else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(text.count * 3 / 4)
        var accumulator: UInt32 = 0
        var count = 0
        for byte in text {
            let value = values[Int(byte)]
            guard value != 0xFF else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            count += 1
            if count == 4 {
                output.append(UInt8(truncatingIfNeeded: accumulator >> 16))
                output.append(UInt8(truncatingIfNeeded: accumulator >> 8))
                output.append(UInt8(truncatingIfNeeded: accumulator))
                accumulator = 0
                count = 0
            }
        }
        switch count {
        case 2:
            // 12 bits carry one byte; the low 4 must be zero.
            guard accumulator & 0x0F == 0 else { return nil }
            output.append(UInt8(truncatingIfNeeded: accumulator >> 4))
        case 3:
            // 18 bits carry two bytes; the low 2 must be zero.
            guard accumulator & 0x03 == 0 else { return nil }
            output.append(UInt8(truncatingIfNeeded: accumulator >> 10))
            output.append(UInt8(truncatingIfNeeded: accumulator >> 2))
        default:
            break
        }
        return Data(output)
    }

    /// Whether `text` is a compact JWS (three dot-separated segments) whose segments are all
    /// canonical base64url, the header and payload non-empty.
    public static func isCanonicalCompactJWS<Bytes: Collection<UInt8>>(_ text: Bytes) -> Bool {
        var segments = 0
        var start = text.startIndex
        var index = text.startIndex
        while true {
            if index == text.endIndex || text[index] == UInt8(ascii: ".") {
                let segment = text[start..<index]
                segments += 1
                guard segments <= 3, segments == 3 || !segment.isEmpty, decode(bytes: segment) != nil else { return false }
                if index == text.endIndex { break }
                start = text.index(after: index)
            }
            index = text.index(after: index)
        }
        return segments == 3
    }
}

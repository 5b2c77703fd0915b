import Foundation

/// Base64url without padding (RFC 4648 §5), as JOSE uses it (RFC 7515 §2). Decoding is
/// canonical: only the URL-safe alphabet, no padding, no whitespace, and the unused low bits
/// of the last character zero, so that one byte string has exactly one text. Anything else is
/// refused: a token that a lenient decoder would accept under several spellings could be
/// replayed or cached under each of them. Byte-level: it runs on every request.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// A byte's 6-bit value, or 0xFF for a byte outside the URL-safe alphabet.
    @inline(__always)
    private static func value(of byte: UInt8) -> UInt8 {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): byte &- UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): byte &- UInt8(ascii: "a") &+ 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte &- UInt8(ascii: "0") &+ 52
        case UInt8(ascii: "-"): 62
        case UInt8(ascii: "_"): 63
        default: 0xFF
        }
    }

    /// Whether `byte` is one of the URL-safe alphabet's 64 characters.
    @inline(__always)
    public static func isAlphabet(_ byte: UInt8) -> Bool { value(of: byte) != 0xFF }

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

    public static func decode(_ string: String) -> Data? { decode(bytes: Array(string.utf8)[...]) }

    /// The bytes of a canonical base64url text, or nil when it is not one. Concrete (not
    /// generic over collections): it runs three times per sign-in, and the unspecialized
    /// generic form cost 3 % of the broker's CPU.
    public static func decode(bytes text: ArraySlice<UInt8>) -> Data? {
        let remainder = text.count % 4
        guard remainder != 1 else { return nil }
        return text.withUnsafeBufferPointer { input -> Data? in
            var output = Data(count: input.count * 3 / 4)
            let written = output.withUnsafeMutableBytes { raw -> Int? in
                guard let out = raw.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return input.isEmpty ? 0 : nil }
                var accumulator: UInt32 = 0
                var count = 0
                var position = 0
                for byte in input {
                    let value = value(of: byte)
                    guard value != 0xFF else { return nil }
                    accumulator = accumulator << 6 | UInt32(value)
                    count += 1
                    if count == 4 {
                        out[position] = UInt8(truncatingIfNeeded: accumulator >> 16)
                        out[position + 1] = UInt8(truncatingIfNeeded: accumulator >> 8)
                        out[position + 2] = UInt8(truncatingIfNeeded: accumulator)
                        position += 3
                        accumulator = 0
                        count = 0
                    }
                }
                switch count {
                case 2:
                    // 12 bits carry one byte; the low 4 must be zero.
                    guard accumulator & 0x0F == 0 else { return nil }
                    out[position] = UInt8(truncatingIfNeeded: accumulator >> 4)
                    position += 1
                case 3:
                    // 18 bits carry two bytes; the low 2 must be zero.
                    guard accumulator & 0x03 == 0 else { return nil }
                    out[position] = UInt8(truncatingIfNeeded: accumulator >> 10)
                    out[position + 1] = UInt8(truncatingIfNeeded: accumulator >> 2)
                    position += 2
                default:
                    break
                }
                return position
            }
            guard let written else { return nil }
            output.count = written
            return output
        }
    }

    /// Whether `text` is a compact JWS (three dot-separated segments) whose segments are all
    /// canonical base64url, the header and payload non-empty.
    public static func isCanonicalCompactJWS(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        var segments = 0
        var start = 0
        for index in 0...bytes.count where index == bytes.count || bytes[index] == UInt8(ascii: ".") {
            let segment = bytes[start..<index]
            segments += 1
            guard segments <= 3, segments == 3 || !segment.isEmpty, segment.count % 4 != 1,
                segment.allSatisfy({ value(of: $0) != 0xFF })
            else { return false }
            // Unused low bits of the last character must be zero.
            if let last = segment.last, segment.count % 4 > 1 {
                let mask: UInt8 = segment.count % 4 == 2 ? 0x0F : 0x03
                guard value(of: last) & mask == 0 else { return false }
            }
            start = index + 1
        }
        return segments == 3
    }
}

import Foundation

/// Base64url without padding (RFC 4648 §5), as JOSE uses it. Byte-level translation: it runs on
/// every request (token segments), so no Foundation string replacement.
public enum Base64URL {
    public static func encode<D: DataProtocol>(_ bytes: D) -> String {
        var base64 = Array(Data(bytes).base64EncodedString().utf8)
        while base64.last == UInt8(ascii: "=") { base64.removeLast() }
        for index in base64.indices {
            switch base64[index] {
            case UInt8(ascii: "+"): base64[index] = UInt8(ascii: "-")
            case UInt8(ascii: "/"): base64[index] = UInt8(ascii: "_")
            default: break
            }
        }
        return String(decoding: base64, as: UTF8.self)
    }

    /// Also accepts the standard alphabet and padding, as lenient JOSE parsers do; the
    /// signature still covers the exact text.
    public static func decode(_ string: String) -> Data? { decode(bytes: string.utf8) }

    /// The same, from the UTF-8 bytes of the text (a segment of a token, without copying it
    /// into a string first).
    public static func decode<Bytes: Collection<UInt8>>(bytes text: Bytes) -> Data? {
        var bytes = Array(text)
        for index in bytes.indices {
            switch bytes[index] {
            case UInt8(ascii: "-"): bytes[index] = UInt8(ascii: "+")
            case UInt8(ascii: "_"): bytes[index] = UInt8(ascii: "/")
            default: break
            }
        }
        let remainder = bytes.count % 4
        if remainder == 1 { return nil }
        if remainder > 0 { bytes.append(contentsOf: repeatElement(UInt8(ascii: "="), count: 4 - remainder)) }
        return Data(base64Encoded: Data(bytes))
    }
}

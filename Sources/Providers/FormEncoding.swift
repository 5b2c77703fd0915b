/// `application/x-www-form-urlencoded` pairs, for request bodies (Apple's token endpoint) and
/// query strings (Graph): every byte but RFC 3986's unreserved characters percent-encoded.
public enum FormEncoding {
    /// `name=value&…`, each value percent-encoded but for RFC 3986's unreserved characters.
    public static func encode(_ pairs: [(String, String)]) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(pairs.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count * 3 + 2 })
        for (index, (name, value)) in pairs.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: "&")) }
            bytes.append(contentsOf: name.utf8)
            bytes.append(UInt8(ascii: "="))
            for byte in value.utf8 {
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                    UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                    bytes.append(byte)
                default:
                    bytes.append(UInt8(ascii: "%"))
                    bytes.append(hexDigits[Int(byte >> 4)])
                    bytes.append(hexDigits[Int(byte & 0x0F)])
                }
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// One value percent-encoded as ``encode(_:)`` encodes it (e.g. for HTTP Basic client
    /// authentication, RFC 6749 §2.3.1).
    public static func escape(_ value: String) -> String {
        String(encode([("", value)]).dropFirst())
    }

    private static let hexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)
}

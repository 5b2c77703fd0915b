/// `application/x-www-form-urlencoded` pairs, for request bodies (Apple's token endpoint) and
/// query strings (Graph): every byte but RFC 3986's unreserved characters percent-encoded.
public enum FormEncoding {
    /// `name=value&…`, each value percent-encoded but for RFC 3986's unreserved characters.
    public static func encode(_ pairs: [(String, String)]) -> String {
        var query = ""
        query.reserveCapacity(pairs.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count * 3 + 2 })
        for (index, (name, value)) in pairs.enumerated() {
            if index > 0 { query += "&" }
            query += name
            query += "="
            for byte in value.utf8 {
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                    UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                    query.unicodeScalars.append(Unicode.Scalar(byte))
                default:
                    query += "%" + hexDigits[Int(byte >> 4)] + hexDigits[Int(byte & 0x0F)]
                }
            }
        }
        return query
    }

    /// One value percent-encoded as ``encode(_:)`` encodes it (e.g. for HTTP Basic client
    /// authentication, RFC 6749 §2.3.1).
    public static func escape(_ value: String) -> String {
        String(encode([("", value)]).dropFirst())
    }

    private static let hexDigits = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "A", "B", "C", "D", "E", "F"]
}

import Foundation
import HummingbirdCore
import NIOCore

/// What the mock's token endpoints read and write: `application/x-www-form-urlencoded` bodies
/// and small JSON answers. Both are direct: Hummingbird's form decoder and Foundation's JSON
/// serialization made a large share of the mock's time in the web sign-in benchmark, where the
/// mock shares the machine with the broker it stands in front of. The broker reads Apple's form
/// the same way (`FormBody` in BrokerServer); the mock depends on no broker target, so it keeps
/// its own copy of these few lines.
enum MockForm {
    /// The fields of a form body (the first of each name), read by Hummingbird's query parser
    /// after every `+` (a form's space) became a space.
    static func fields(_ body: ByteBuffer) -> [String: String] {
        var bytes = Array(body.readableBytesView)
        for index in bytes.indices where bytes[index] == UInt8(ascii: "+") { bytes[index] = UInt8(ascii: " ") }
        var fields: [String: String] = [:]
        for (name, value) in URI("/?" + String(decoding: bytes, as: UTF8.self)).queryParameters where fields[String(name)] == nil {
            fields[String(name)] = String(value)
        }
        return fields
    }
}

/// A JSON object of string and integer members, in the order given.
enum MockJSON {
    enum Value {
        case string(String)
        case int(Int)
    }

    static func object(_ members: [(String, Value)]) -> Data {
        var out: [UInt8] = [UInt8(ascii: "{")]
        for (index, (name, value)) in members.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            quote(name, into: &out)
            out.append(UInt8(ascii: ":"))
            switch value {
            case .string(let string): quote(string, into: &out)
            case .int(let int): out.append(contentsOf: String(int).utf8)
            }
        }
        out.append(UInt8(ascii: "}"))
        return Data(out)
    }

    /// A JSON string: `"` and `\` escaped, control characters as `\u00XX`.
    static func quote(_ string: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), byte])
            case 0..<0x20: out.append(contentsOf: Array(String(format: "\\u%04x", byte).utf8))
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

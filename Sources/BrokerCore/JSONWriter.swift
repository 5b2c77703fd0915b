/// Writes compact JSON text straight into bytes, for the few documents on the sign-in hot path
/// (an access token's claims, the sign-in response) where Foundation's `JSONEncoder` costs
/// more than the rest of their handling (decision 0011). Members are written in call order;
/// strings are escaped as RFC 8259 requires (quote, backslash, control characters), everything
/// else is UTF-8 as is. Commas between members and elements are the writer's business.
public struct JSONWriter {
    public private(set) var bytes: [UInt8] = []
    /// Per open container: whether an item was written already (the next one needs a comma).
    private var needsComma: [Bool] = []
    /// A member's name was just written: its value needs no comma.
    private var afterKey = false

    public init(capacity: Int = 512) { bytes.reserveCapacity(capacity) }

    // MARK: Containers

    public mutating func beginObject() {
        separate()
        bytes.append(UInt8(ascii: "{"))
        needsComma.append(false)
    }

    public mutating func endObject() {
        needsComma.removeLast()
        bytes.append(UInt8(ascii: "}"))
    }

    public mutating func beginArray() {
        separate()
        bytes.append(UInt8(ascii: "["))
        needsComma.append(false)
    }

    public mutating func endArray() {
        needsComma.removeLast()
        bytes.append(UInt8(ascii: "]"))
    }

    /// Starts a member of the open object; its value follows with any value method.
    public mutating func key(_ name: String) {
        separate()
        writeString(name)
        bytes.append(UInt8(ascii: ":"))
        afterKey = true
    }

    /// A comma before every item of a container but its first.
    private mutating func separate() {
        if afterKey {
            afterKey = false
            return
        }
        guard let last = needsComma.indices.last else { return }
        if needsComma[last] { bytes.append(UInt8(ascii: ",")) }
        needsComma[last] = true
    }

    // MARK: Values

    public mutating func string(_ value: String) {
        separate()
        writeString(value)
    }

    public mutating func int(_ value: Int) {
        separate()
        bytes.append(contentsOf: String(value).utf8)
    }

    public mutating func bool(_ value: Bool) {
        separate()
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    public mutating func double(_ value: Double) {
        separate()
        bytes.append(contentsOf: "\(value)".utf8)
    }

    public mutating func null() {
        separate()
        bytes.append(contentsOf: "null".utf8)
    }

    /// The string, or null when nil.
    public mutating func string(_ value: String?) {
        if let value { string(value) } else { null() }
    }

    /// The number, or null when nil.
    public mutating func int(_ value: Int?) {
        if let value { int(value) } else { null() }
    }

    // MARK: Members

    /// Any parsed value; object members in sorted order (the same value, the same bytes).
    public mutating func value(_ value: JSONValue) {
        switch value {
        case .null: null()
        case .bool(let flag): bool(flag)
        case .string(let text): string(text)
        case .number(let number):
            if number.rounded() == number, abs(number) < 1e15 { int(Int(number)) } else { number.isFinite ? double(number) : null() }
        case .array(let items):
            beginArray()
            for item in items { self.value(item) }
            endArray()
        case .object(let members):
            beginObject()
            for name in members.keys.sorted() {
                key(name)
                if let member = members[name] { self.value(member) }
            }
            endObject()
        }
    }

    public mutating func member(_ name: String, _ value: String) {
        key(name)
        string(value)
    }

    public mutating func member(_ name: String, _ value: String?) {
        key(name)
        string(value)
    }

    public mutating func member(_ name: String, _ value: Int) {
        key(name)
        int(value)
    }

    public mutating func member(_ name: String, _ value: Int?) {
        key(name)
        int(value)
    }

    public mutating func member(_ name: String, _ value: Bool) {
        key(name)
        bool(value)
    }

    /// A member only when the value is present (what synthesized `Codable` does for optionals).
    public mutating func memberIfPresent(_ name: String, _ value: String?) {
        if let value { member(name, value) }
    }

    public mutating func memberIfPresent(_ name: String, _ value: Int?) {
        if let value { member(name, value) }
    }

    // MARK: Escaping

    private static let hexDigits = Array("0123456789abcdef".utf8)

    private mutating func writeString(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        // Most strings need no escape at all: copy them whole.
        // Scanned as a buffer when the string is stored contiguously (native strings are):
        // stepping through `String.UTF8View` checks each index (0.8 % of a sign-in's CPU).
        let escaped = { (byte: UInt8) in byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") }
        let needsEscape = value.utf8.withContiguousStorageIfAvailable { $0.contains(where: escaped) } ?? value.utf8.contains(where: escaped)
        guard needsEscape else {
            bytes.append(contentsOf: value.utf8)
            bytes.append(UInt8(ascii: "\""))
            return
        }
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case UInt8(ascii: "\n"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case UInt8(ascii: "\r"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case UInt8(ascii: "\t"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20:
                bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                bytes.append(Self.hexDigits[Int(byte >> 4)])
                bytes.append(Self.hexDigits[Int(byte & 0x0F)])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

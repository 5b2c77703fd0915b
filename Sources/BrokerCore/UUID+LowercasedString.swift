import Foundation

extension UUID {
    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// The lowercase 8-4-4-4-12 form the API, tokens and sealing contexts use, written
    /// directly (`uuidString.lowercased()` builds two strings; a sign-in formats five UUIDs).
    public var lowercasedString: String {
        withUnsafeBytes(of: uuid) { raw in
            String(unsafeUninitializedCapacity: 36) { buffer in
                var index = 0
                for (position, byte) in raw.enumerated() {
                    if position == 4 || position == 6 || position == 8 || position == 10 {
                        buffer[index] = UInt8(ascii: "-")
                        index += 1
                    }
                    buffer[index] = Self.hexDigits[Int(byte >> 4)]
                    buffer[index + 1] = Self.hexDigits[Int(byte & 0x0F)]
                    index += 2
                }
                return index
            }
        }
    }
}

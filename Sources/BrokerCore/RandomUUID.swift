import Foundation

extension UUID {
    /// A random (version 4) UUID from ``SecureRandom`` (one system call). Foundation's `UUID()`
    /// on Linux opens and reads `/dev/urandom` for every UUID; a sign-in makes three to five.
    public static func random() -> UUID {
        let random = SecureRandom.bytes(16)
        return UUID(
            uuid: (
                random[0], random[1], random[2], random[3], random[4], random[5],
                (random[6] & 0x0F) | 0x40,  // version 4
                random[7],
                (random[8] & 0x3F) | 0x80,  // RFC 4122 variant
                random[9], random[10], random[11], random[12], random[13], random[14], random[15]
            ))
    }
}

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

extension UUID {
    /// A time-ordered UUID (version 7, RFC 9562): 48 bits of Unix time in milliseconds, then 74
    /// random bits from ``SecureRandom``. PostgreSQL orders `uuid` by its bytes, so rows keyed by
    /// these are appended at the right edge of their indexes instead of each landing on a random
    /// page of an index that outgrows memory (decision 0022). The id shows when it was made, as
    /// the row's `created_at` does.
    public static func timeOrdered(at date: Date = Date()) -> UUID {
        let milliseconds = UInt64(max(0, (date.timeIntervalSince1970 * 1_000).rounded(.down)))
        let random = SecureRandom.bytes(10)
        func byte(_ shift: UInt64) -> UInt8 { UInt8(truncatingIfNeeded: milliseconds >> shift) }
        return UUID(
            uuid: (
                byte(40), byte(32), byte(24), byte(16), byte(8), byte(0),
                (random[0] & 0x0F) | 0x70,  // version 7
                random[1],
                (random[2] & 0x3F) | 0x80,  // RFC 9562 variant
                random[3], random[4], random[5], random[6], random[7], random[8], random[9]
            ))
    }
}

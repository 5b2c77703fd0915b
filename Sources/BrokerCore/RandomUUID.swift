import Foundation

extension UUID {
    /// A random (version 4) UUID from ``SecureRandom``. Foundation's `UUID()` on Linux opens and
    /// reads `/dev/urandom` for every UUID; a sign-in makes three to five.
    public static func random() -> UUID {
        stamped(SecureRandom.bytes(16), version: 4)
    }

    /// A time-ordered UUID (version 7, RFC 9562): 48 bits of Unix time in milliseconds, then 74
    /// random bits from ``SecureRandom``. PostgreSQL orders `uuid` by its bytes, so rows keyed by
    /// these are appended at the right edge of their indexes instead of each landing on a random
    /// page of an index that outgrows memory (decision 0022). The id shows when it was made, as
    /// the row's `created_at` does.
    public static func timeOrdered(at date: Date = Date()) -> UUID {
        let milliseconds = UInt64(max(0, (date.timeIntervalSince1970 * 1_000).rounded(.down)))
        let time = stride(from: 40, through: 0, by: -8).map { UInt8(truncatingIfNeeded: milliseconds >> UInt64($0)) }
        return stamped(time + SecureRandom.bytes(10), version: 7)
    }

    /// 16 bytes as a UUID with its version nibble and the RFC 9562 variant bits set.
    private static func stamped(_ b: [UInt8], version: UInt8) -> UUID {
        UUID(
            uuid: (
                b[0], b[1], b[2], b[3], b[4], b[5], (b[6] & 0x0F) | (version << 4), b[7], (b[8] & 0x3F) | 0x80,
                b[9], b[10], b[11], b[12], b[13], b[14], b[15]
            ))
    }
}

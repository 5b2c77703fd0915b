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
        timeOrdered(at: date, filling: SecureRandom.bytes(10))
    }

    /// A version 7 UUID for `date` whose other 74 bits are taken from the first ten of `bytes`
    /// (a digest, for an id that must be the same each time it is derived) instead of random.
    public static func timeOrdered(at date: Date, filling bytes: some Collection<UInt8>) -> UUID {
        // 48 bits of milliseconds: dates before 1970 or after the year 10889 (a token's `iat`
        // can say anything) take the nearest end.
        let exact = (date.timeIntervalSince1970 * 1_000).rounded(.down)
        let milliseconds: UInt64 = exact.isNaN || exact <= 0 ? 0 : exact >= 0xFFFF_FFFF_FFFF ? 0xFFFF_FFFF_FFFF : UInt64(exact)
        let time = stride(from: 40, through: 0, by: -8).map { UInt8(truncatingIfNeeded: milliseconds >> UInt64($0)) }
        let rest = Array(bytes.prefix(10))
        return stamped(time + rest + Array(repeating: 0, count: 10 - rest.count), version: 7)
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

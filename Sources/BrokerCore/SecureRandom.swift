#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Random bytes from the operating system's CSPRNG in one system call: `/dev/urandom`, opened
/// once, read per call. `SystemRandomNumberGenerator` (which swift-crypto's
/// `SymmetricKey(size:)` uses too) makes one `getrandom(2)` call per 8 bytes, and a sign-in
/// needs 80 random bytes (a refresh token and three UUIDs).
public enum SecureRandom {
    /// The descriptor of `/dev/urandom`, or -1 when it cannot be opened (then the standard
    /// library's generator is used).
    private static let urandom: Int32 = open("/dev/urandom", O_RDONLY | O_CLOEXEC)

    public static func bytes(_ count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            var filled = 0
            if urandom >= 0, let base = buffer.baseAddress {
                while filled < count {
                    let got = read(urandom, base + filled, count - filled)
                    if got > 0 {
                        filled += got
                    } else if got < 0, errno == EINTR {
                        continue
                    } else {
                        break
                    }
                }
            }
            // Should reading ever fail, the standard library's generator (which stops the
            // process rather than return non-random bytes) fills the rest.
            var generator = SystemRandomNumberGenerator()
            while filled < count {
                buffer[filled] = UInt8.random(in: .min ... .max, using: &generator)
                filled += 1
            }
            initialized = count
        }
    }
}

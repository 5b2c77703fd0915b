#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Synchronization

/// Random bytes from the operating system's CSPRNG: `/dev/urandom`, opened once.
/// `SystemRandomNumberGenerator` (which swift-crypto's `SymmetricKey(size:)` uses too) makes one
/// `getrandom(2)` call per 8 bytes, and a sign-in needs 64 random bytes (a refresh token and
/// two UUIDs). Small requests are served from a 4 KiB block read in one system call (one read
/// per ~60 sign-ins instead of three per sign-in); each byte is handed out once and zeroed in
/// the block as it leaves (decision 0022).
public enum SecureRandom {
    /// The descriptor of `/dev/urandom`, or -1 when it cannot be opened (then the standard
    /// library's generator is used).
    private static let urandom: Int32 = open("/dev/urandom", O_RDONLY | O_CLOEXEC)

    /// Requests up to this size come from the block; larger ones are read directly.
    private static let blockedLimit = 256
    private static let blockSize = 4_096

    private struct Block {
        var bytes = [UInt8](repeating: 0, count: SecureRandom.blockSize)
        /// The first byte not handed out yet; `blockSize` when the block is spent.
        var next = SecureRandom.blockSize
    }

    private static let block = Mutex(Block())

    public static func bytes(_ count: Int) -> [UInt8] {
        guard count <= blockedLimit else { return readDirectly(count) }
        return block.withLock { block in
            if blockSize - block.next < count {
                block.bytes.withUnsafeMutableBufferPointer { fill($0) }
                block.next = 0
            }
            let range = block.next..<(block.next + count)
            let out = Array(block.bytes[range])
            block.bytes.replaceSubrange(range, with: repeatElement(0, count: count))
            block.next += count
            return out
        }
    }

    private static func readDirectly(_ count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            fill(buffer)
            initialized = count
        }
    }

    /// Fills the whole buffer from `/dev/urandom`. Should reading ever fail, the standard
    /// library's generator (which stops the process rather than return non-random bytes)
    /// fills the rest.
    private static func fill(_ buffer: UnsafeMutableBufferPointer<UInt8>) {
        let count = buffer.count
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
        var generator = SystemRandomNumberGenerator()
        while filled < count {
            buffer[filled] = UInt8.random(in: .min ... .max, using: &generator)
            filled += 1
        }
    }
}

import Crypto
import Foundation

extension UUID {
    /// A random (version 4) UUID from BoringSSL's CSPRNG. Foundation's `UUID()` on Linux opens
    /// and reads `/dev/urandom` for every UUID, a few system calls each time; a sign-in makes
    /// three to five of them.
    public static func random() -> UUID {
        SymmetricKey(size: .bits128).withUnsafeBytes { raw in
            var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            withUnsafeMutableBytes(of: &bytes) { $0.copyMemory(from: raw) }
            bytes.6 = (bytes.6 & 0x0F) | 0x40  // version 4
            bytes.8 = (bytes.8 & 0x3F) | 0x80  // RFC 4122 variant
            return UUID(uuid: bytes)
        }
    }
}

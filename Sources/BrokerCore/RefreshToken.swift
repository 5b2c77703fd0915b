import Crypto
import Foundation

/// An opaque refresh token: 256 bits, base64url, prefixed `ibr_`. Only its SHA-256 is stored;
/// presenting it again after rotation, past the reuse interval, revokes its whole family.
///
/// A session's first token is random; each successor is the HMAC-SHA256 of the token it
/// replaces under a server key (decision 0017). A retried refresh can so be answered with the
/// same successor again although only hashes are stored.
public struct RefreshToken: Sendable {
    public let value: String

    public static func generate() -> RefreshToken {
        RefreshToken(value: "ibr_" + Base64URL.encode(SecureRandom.bytes(32)))
    }

    /// The token that replaces this one at rotation: HMAC-SHA256 of this token under `key`.
    /// Unpredictable without the key; the same every time for the same token.
    public func successor(key: SymmetricKey) -> RefreshToken {
        let mac = HMAC<SHA256>.authenticationCode(for: Data(value.utf8), using: key)
        return RefreshToken(value: "ibr_" + Base64URL.encode(Data(mac)))
    }

    public init?(parsing value: String) {
        guard value.hasPrefix("ibr_"), value.utf8.count == 47,
            value.utf8.dropFirst(4).allSatisfy({ $0.isBase64URL })
        else { return nil }
        self.value = value
    }

    private init(value: String) { self.value = value }

    public var hash: Data { Data(SHA256.hash(data: Data(value.utf8))) }
}

extension UInt8 {
    var isBase64URL: Bool {
        (0x41...0x5A).contains(self) || (0x61...0x7A).contains(self) || (0x30...0x39).contains(self) || self == 0x2D
            || self == 0x5F
    }
}

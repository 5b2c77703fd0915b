import Crypto
import Foundation

/// An opaque refresh token, prefixed `ibr_`. Only its SHA-256 is stored; presenting it again
/// after rotation, past the reuse interval, revokes its whole family.
///
/// A token names its session (decision 0027): `ibr_` + base64url(the session id's 16 bytes +
/// 32 secret bytes), 68 characters. The session is then found by its primary key and the
/// token checked against the stored hash, so no index over token hashes grows with every
/// sign-in. Tokens issued before (`ibr_` + base64url(32 bytes), 47 characters) carry no
/// session id; they are found by their hash until their families end.
///
/// A session's first token is random; each successor is the HMAC-SHA256 of the token it
/// replaces under a server key (decision 0017), with the same session id. A retried refresh
/// can so be answered with the same successor again although only hashes are stored.
public struct RefreshToken: Sendable {
    public let value: String
    /// The session the token belongs to; nil for a token issued before tokens named it.
    public let sessionID: UUID?

    static let legacyLength = 47
    static let length = 68

    /// A new token of `sessionID`.
    public static func generate(sessionID: UUID) -> RefreshToken {
        RefreshToken(sessionID: sessionID, secret: Data(SecureRandom.bytes(32)))
    }

    /// The first token of `sessionID` when it must be made again later without being stored:
    /// HMAC-SHA256 of `material` under `key`. A relying party's session opens at the provider's
    /// callback with the token its authorization code derives (decision 0085), and the token
    /// endpoint derives it again from the code it redeems.
    public static func derived(sessionID: UUID, from material: String, key: SymmetricKey) -> RefreshToken {
        RefreshToken(sessionID: sessionID, secret: Data(HMAC<SHA256>.authenticationCode(for: Data(material.utf8), using: key)))
    }

    /// The token that replaces this one at rotation: HMAC-SHA256 of this token under `key`,
    /// with the same session id. Unpredictable without the key; the same every time for the
    /// same token. A token without a session id has a successor without one.
    public func successor(key: SymmetricKey) -> RefreshToken {
        let mac = Data(HMAC<SHA256>.authenticationCode(for: Data(value.utf8), using: key))
        guard let sessionID else { return RefreshToken(value: "ibr_" + Base64URL.encode(mac), sessionID: nil) }
        return RefreshToken(sessionID: sessionID, secret: mac)
    }

    public init?(parsing value: String) {
        guard value.hasPrefix("ibr_"), value.utf8.count == Self.length || value.utf8.count == Self.legacyLength,
            value.utf8.dropFirst(4).allSatisfy({ $0.isBase64URL })
        else { return nil }
        if value.utf8.count == Self.legacyLength {
            self.init(value: value, sessionID: nil)
            return
        }
        guard let bytes = Base64URL.decode(String(value.dropFirst(4))), bytes.count == 48 else { return nil }
        // Only the one canonical spelling of 48 bytes is a token.
        guard "ibr_" + Base64URL.encode(bytes) == value else { return nil }
        self.init(value: value, sessionID: UUID(bytes: bytes.prefix(16)))
    }

    private init(value: String, sessionID: UUID?) {
        self.value = value
        self.sessionID = sessionID
    }

    private init(sessionID: UUID, secret: Data) {
        self.init(value: "ibr_" + Base64URL.encode(sessionID.bytes + secret), sessionID: sessionID)
    }

    public var hash: Data { Data(SHA256.hash(data: Data(value.utf8))) }
}

extension UUID {
    /// The 16 bytes of the UUID, in order.
    var bytes: Data {
        withUnsafeBytes(of: uuid) { Data($0) }
    }

    /// The UUID of 16 bytes (the first 16 when there are more).
    init(bytes: Data) {
        var raw: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &raw) { target in
            for (offset, byte) in bytes.prefix(16).enumerated() { target[offset] = byte }
        }
        self.init(uuid: raw)
    }
}

extension UInt8 {
    var isBase64URL: Bool {
        (0x41...0x5A).contains(self) || (0x61...0x7A).contains(self) || (0x30...0x39).contains(self) || self == 0x2D
            || self == 0x5F
    }
}

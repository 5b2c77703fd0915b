import Foundation

/// The `state` a web sign-in hands to the provider. Every form begins with the tenant's id in
/// base64url (22 characters, decision 0092), so that its callback reads and writes in that
/// tenant's scope (the tenant wall) rather than across every tenant's.
///
/// - **Sealed** (decision 0099, what a sign-in starts with): the tenant part, then the sign-in
///   itself, sealed (``SecretBox/sealUnderFreshKey(_:purpose:context:)``), in base64url. Nothing
///   is written when a sign-in starts; its callback writes the row when it claims the state.
///   Longer than ``length``, at most ``maxLength``.
/// - **Stored** (decision 0092): the tenant part and 32 random bytes, ``length`` characters; the
///   sign-in is a row written when it started, found by the hash of the whole text.
/// - **Random** (before decision 0092): 32 random bytes alone, 43 characters; names no tenant
///   (``tenant(of:)`` is nil) and is read across tenants.
///
/// The two older forms are made no more; they are read for the callbacks of sign-ins a broker
/// of an earlier version started. Such states live ten minutes.
public enum WebSignInStateToken {
    /// Characters of the tenant part (16 bytes in base64url, unpadded).
    static let tenantLength = 22
    /// Characters of a stored state.
    public static let length = tenantLength + 43
    /// The longest state a callback reads. A sealed state holds the return URL (at most 2,048
    /// bytes), the caller's state (512), a relying party's nonce (255) and the provider's redirect
    /// URI (2,000) at most: under 8 KB in base64url with its seal, typically 300 to 700 characters.
    public static let maxLength = 16_384

    /// A stored state of `tenantID`, as a broker before decision 0099 made it (tests of the
    /// callbacks of sign-ins started before an upgrade).
    public static func make(tenantID: UUID) -> String {
        Base64URL.encode(tenantID.bytes) + Base64URL.encode(SecureRandom.bytes(32))
    }

    /// A sealed state of `tenantID` around `box`.
    public static func sealed(tenantID: UUID, box: Data) -> String {
        Base64URL.encode(tenantID.bytes) + Base64URL.encode(box)
    }

    /// The tenant a state of the stored or the sealed form names; nil for any other text (a
    /// state of the random form, or one not made here).
    public static func tenant(of state: String) -> UUID? {
        let text = Array(state.utf8)
        guard text.count == length || (text.count > length && text.count <= maxLength) else { return nil }
        return tenant(text)
    }

    /// The sealed box of a state of the sealed form, with the tenant it names; nil for any other
    /// text. That the box opens, and for that tenant, is the caller's to check. Only the one text
    /// `sealed(tenantID:box:)` writes for a box reads as it: a state is found by the hash of its
    /// text, so a second spelling of the same box (other bits in its last character) would be a
    /// second sign-in.
    public static func sealedBox(of state: String) -> (tenantID: UUID, box: Data)? {
        let text = Array(state.utf8)
        guard text.count > length, text.count <= maxLength, let tenantID = tenant(text),
            let box = Base64URL.decode(bytes: text[tenantLength...]),
            Base64URL.encode(box).utf8.elementsEqual(text[tenantLength...])
        else { return nil }
        return (tenantID, box)
    }

    private static func tenant(_ text: [UInt8]) -> UUID? {
        guard let decoded = Base64URL.decode(bytes: text[0..<tenantLength]), decoded.count == 16,
            Base64URL.encode(decoded) == String(decoding: text[0..<tenantLength], as: UTF8.self)
        else { return nil }
        return UUID(bytes: decoded)
    }
}

import Foundation

/// The state a web sign-in hands to the provider (decision 0092): the tenant's id and 32 random
/// bytes, each in base64url, 22 + 43 characters. The random part makes it unguessable; the
/// tenant lets its callback read and write the state in that tenant's scope (the tenant wall)
/// rather than across every tenant's. The state is still found only by the hash of the whole
/// text: a state whose tenant part was changed matches no row, in any scope.
///
/// A state made before this form (43 characters, the random part alone) names no tenant
/// (``tenant(of:)`` is nil): its callback reads it across tenants, as all did before. Such
/// states live ten minutes, so only the callbacks of sign-ins started before an upgrade meet it.
public enum WebSignInStateToken {
    /// Characters of the tenant part (16 bytes in base64url, unpadded).
    static let tenantLength = 22
    /// Characters of the whole state.
    public static let length = tenantLength + 43

    /// A new state of `tenantID`.
    public static func make(tenantID: UUID) -> String {
        Base64URL.encode(tenantID.bytes) + Base64URL.encode(SecureRandom.bytes(32))
    }

    /// The tenant a state of this form names; nil for any other text (a state of the older form,
    /// or one not made here).
    public static func tenant(of state: String) -> UUID? {
        let text = Array(state.utf8)
        guard text.count == length, let decoded = Base64URL.decode(bytes: text[0..<tenantLength]), decoded.count == 16,
            Base64URL.encode(decoded) == String(decoding: text[0..<tenantLength], as: UTF8.self)
        else { return nil }
        return UUID(bytes: decoded)
    }
}

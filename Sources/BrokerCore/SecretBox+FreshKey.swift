import Crypto
import Foundation

/// Sealing under a key of its own for each value (decision 0099), for what is sealed at the rate
/// of requests rather than of operator actions: a web sign-in's state is sealed once per sign-in
/// started. AES-GCM's random 96-bit nonces are safe for about 2^32 values under one key; at a
/// thousand sign-ins a second one key would reach that in seven weeks. Each value here has a
/// random 24-byte salt, and the key that seals it is derived from the master key, the purpose
/// and the salt (HKDF-SHA256), so no key seals more than one value.
///
/// Layout: version (2), salt (24 bytes), AES-GCM's nonce, ciphertext and tag: 53 bytes more than
/// the plaintext.
extension SecretBox {
    static let freshKeyVersion: UInt8 = 2
    static let saltLength = 24

    public func sealUnderFreshKey(_ plaintext: some DataProtocol, purpose: String, context: String) throws -> Data {
        let salt = SecureRandom.bytes(Self.saltLength)
        let box = try AES.GCM.seal(plaintext, using: freshKey(purpose: purpose, salt: salt), authenticating: Data(context.utf8))
        guard let combined = box.combined else { throw BrokerError.secretUnreadable(context) }
        var sealed = Data([Self.freshKeyVersion])
        sealed.append(contentsOf: salt)
        sealed.append(combined)
        return sealed
    }

    /// The plaintext, or nil when `sealed` was not sealed by ``sealUnderFreshKey(_:purpose:context:)``
    /// with this master key, purpose and context, or was changed since.
    public func openUnderFreshKey(_ sealed: Data, purpose: String, context: String) -> Data? {
        guard sealed.count > 1 + Self.saltLength, sealed.first == Self.freshKeyVersion else { return nil }
        let salt = sealed.dropFirst().prefix(Self.saltLength)
        guard let box = try? AES.GCM.SealedBox(combined: sealed.dropFirst(1 + Self.saltLength)) else { return nil }
        return try? AES.GCM.open(box, using: freshKey(purpose: purpose, salt: salt), authenticating: Data(context.utf8))
    }

    private func freshKey(purpose: String, salt: some DataProtocol) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: masterKey.key, salt: salt, info: Data("identitybroker/\(purpose)".utf8), outputByteCount: 32)
    }
}

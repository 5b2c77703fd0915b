import Crypto
import Foundation

/// The 32-byte key that encrypts every secret the broker stores (`BROKER_MASTER_KEY`).
public struct MasterKey: Sendable {
    let key: SymmetricKey

    /// Parses the base64 form of a 32-byte key.
    public init(base64: String) throws(BrokerError) {
        let trimmed = base64.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let data = Data(base64Encoded: trimmed), data.count == 32 else {
            throw .invalidArgument(
                "BROKER_MASTER_KEY must be 32 random bytes, base64-encoded.", rule: "master_key")
        }
        self.key = SymmetricKey(data: data)
    }

    public static func generate() -> (key: MasterKey, base64: String) {
        let key = SymmetricKey(size: .bits256)
        let base64 = key.withUnsafeBytes { Data($0).base64EncodedString() }
        // Cannot fail: the base64 of a fresh 32-byte key always parses.
        return (MasterKey(key: key), base64)
    }

    private init(key: SymmetricKey) { self.key = key }

    /// The base64 form, for handing a test key to a child process.
    public var base64ForTests: String { key.withUnsafeBytes { Data($0).base64EncodedString() } }
}

/// Seals secrets at rest with AES-256-GCM under the master key. The associated data binds a
/// ciphertext to its place (e.g. `signing_key:<tenant>:<kid>`), so a sealed value copied to
/// another row does not open there.
public struct SecretBox: Sendable {
    /// Leading byte of every sealed value, so the format can change later.
    static let version: UInt8 = 1
    let masterKey: MasterKey

    public init(masterKey: MasterKey) {
        self.masterKey = masterKey
    }

    /// A key for one purpose derived from the master key (HKDF-SHA256): a secret of its own
    /// that never decrypts anything else and needs no storage.
    public func derivedKey(purpose: String) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: masterKey.key, info: Data("identitybroker/\(purpose)".utf8), outputByteCount: 32)
    }

    public func seal(_ plaintext: some DataProtocol, context: String) throws -> Data {
        let box = try AES.GCM.seal(plaintext, using: masterKey.key, authenticating: Data(context.utf8))
        guard let combined = box.combined else {
            throw BrokerError.secretUnreadable(context)
        }
        return Data([Self.version]) + combined
    }

    public func open(_ sealed: Data, context: String, what: String) throws(BrokerError) -> Data {
        guard sealed.first == Self.version else { throw .secretUnreadable(what) }
        do {
            let box = try AES.GCM.SealedBox(combined: sealed.dropFirst())
            return try AES.GCM.open(box, using: masterKey.key, authenticating: Data(context.utf8))
        } catch {
            throw .secretUnreadable(what)
        }
    }
}

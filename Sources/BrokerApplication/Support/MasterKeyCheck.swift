import BrokerCore
import Foundation
import Storage

/// Whether a master key is the one this database's secrets are sealed with (issue 39 B8): the
/// database keeps a value sealed with it (migration 0030), which `serve` and every command that
/// seals or opens a secret open first. A key that does not open it is refused, naming
/// `BROKER_MASTER_KEY`, before anything is served or written. The first process to find no
/// value tests its key against a sealed signing key (when the database has one) and writes it.
public enum MasterKeyCheck {
    static let context = "master_key_check"
    static let plaintext = Data("identitybroker master key check 1".utf8)

    public static let mismatch = BrokerError(
        code: "master_key_mismatch", kind: .unavailable, title: "Wrong master key",
        detail:
            "The master key does not open this database's secrets: they were sealed with another BROKER_MASTER_KEY. Nothing was served or changed.",
        hint:
            "Set BROKER_MASTER_KEY to the base64 key this database was set up with (with the embedded default, the master.key of its BROKER_DATA_DIR)."
    )

    /// Returns `secrets` when its key opens the database's check value; throws ``mismatch``
    /// when it does not.
    @discardableResult
    public static func verify(_ secrets: SecretBox, database: Database) async throws -> SecretBox {
        if let sealed = try await database.masterKeyCheck.sealed() {
            try check(sealed, with: secrets)
            return secrets
        }
        if let key = try await database.masterKeyCheck.anySealedSigningKey() {
            do {
                _ = try secrets.open(
                    key.sealed, context: SigningKeyRecord.sealingContext(tenantID: key.tenantID, kid: key.kid), what: "signing key")
            } catch {
                throw mismatch
            }
        }
        // Another process may have written its value meanwhile: the one in force is checked.
        try check(try await database.masterKeyCheck.adopt(try secrets.seal(plaintext, context: context)), with: secrets)
        return secrets
    }

    private static func check(_ sealed: Data, with secrets: SecretBox) throws {
        guard (try? secrets.open(sealed, context: context, what: "master key check")) == plaintext else { throw mismatch }
    }
}

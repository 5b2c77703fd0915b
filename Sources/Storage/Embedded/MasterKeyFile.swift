import BrokerCore
import Foundation

/// The master key of the embedded default: generated once into the data folder (mode 0600)
/// when `BROKER_MASTER_KEY` is not set.
public enum MasterKeyFile {
    public static func loadOrCreate(in dataDirectory: URL) throws -> MasterKey {
        let url = dataDirectory.appendingPathComponent("master.key")
        let fm = FileManager.default
        try fm.createDirectory(at: dataDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o711])
        if fm.fileExists(atPath: url.path) {
            return try MasterKey(base64: String(contentsOf: url, encoding: .utf8))
        }
        let (key, base64) = MasterKey.generate()
        let temporary = url.appendingPathExtension("tmp-\(getpid())")
        guard fm.createFile(atPath: temporary.path, contents: Data((base64 + "\n").utf8), attributes: [.posixPermissions: 0o600])
        else {
            throw StorageError.configuration("Cannot write the master key file \(url.path).")
        }
        // link(2) fails if another process created the file first: then use theirs.
        if link(temporary.path, url.path) != 0 {
            try? fm.removeItem(at: temporary)
            return try MasterKey(base64: String(contentsOf: url, encoding: .utf8))
        }
        try? fm.removeItem(at: temporary)
        return key
    }
}

import BrokerCore
import Crypto
import Foundation

/// One `Migrations/NNNN_name.sql` file.
public struct Migration: Sendable, Equatable {
    public let version: Int
    public let name: String
    public let sql: String

    /// Hex SHA-256 of the file's text: an applied migration whose text changed is refused.
    public var checksum: String {
        Hex.encode(SHA256.hash(data: Data(sql.utf8)))
    }

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }

    /// Parses `0001_foundation.sql` into version 1, name `foundation`.
    public init?(fileName: String, sql: String) {
        guard fileName.hasSuffix(".sql") else { return nil }
        let stem = fileName.dropLast(4)
        guard let underscore = stem.firstIndex(of: "_"),
            let version = Int(stem[..<underscore]), version > 0
        else { return nil }
        self.init(version: version, name: String(stem[stem.index(after: underscore)...]), sql: sql)
    }

    /// The migrations compiled into the broker (Migrations/*.sql), in version order.
    public static func bundled() throws -> [Migration] {
        try validated(
            EmbeddedMigrations.files.map { file in
                guard let migration = Migration(fileName: file.name, sql: file.sql) else {
                    throw StorageError.migration("Migration file '\(file.name)' is not named NNNN_name.sql.")
                }
                return migration
            })
    }

    public static func load(from directory: URL) throws -> [Migration] {
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        var migrations: [Migration] = []
        for file in files where file.hasSuffix(".sql") {
            let sql = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            guard let migration = Migration(fileName: file, sql: sql) else {
                throw StorageError.migration("Migration file '\(file)' is not named NNNN_name.sql.")
            }
            migrations.append(migration)
        }
        return try validated(migrations)
    }

    static func validated(_ migrations: [Migration]) throws -> [Migration] {
        let migrations = migrations.sorted { $0.version < $1.version }
        for (earlier, later) in zip(migrations, migrations.dropFirst()) where earlier.version == later.version {
            throw StorageError.migration(
                "Two migrations share version \(earlier.version): \(earlier.name) and \(later.name).")
        }
        return migrations
    }
}

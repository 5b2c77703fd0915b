import Foundation
import Logging
import PostgresNIO

extension Database {
    public var masterKeyCheck: MasterKeyCheckRepository { MasterKeyCheckRepository(client: client, logger: logger) }
}

/// The database's master-key check value (migration 0030): one value sealed with the master
/// key that every process opens before it seals or opens a secret.
public struct MasterKeyCheckRepository: Sendable {
    let client: PostgresClient
    let logger: Logger

    /// The sealed check value; nil when no process has written one yet.
    public func sealed() async throws -> Data? {
        try await client.rows("SELECT sealed FROM master_key_check", logger: logger).first?.decode(Data.self)
    }

    /// Writes the check value unless one exists; returns the value in force afterwards (this one,
    /// or another process's that came first).
    public func adopt(_ sealed: Data) async throws -> Data {
        _ = try await client.rows(
            "INSERT INTO master_key_check (sealed) VALUES (\(sealed)) ON CONFLICT (id) DO NOTHING", logger: logger)
        return try await self.sealed() ?? sealed
    }

    /// One sealed signing key of any tenant (its tenant, kid and sealed private key), to test a
    /// master key against before the check value exists; nil when the database has none.
    public func anySealedSigningKey() async throws -> (tenantID: UUID, kid: String, sealed: Data)? {
        try await TenantScope.acrossTenants(because: "the master key is checked against any tenant's sealed signing key") {
            let rows = try await client.rows(
                "SELECT tenant_id, kid, private_key_sealed FROM signing_keys ORDER BY created_at LIMIT 1", logger: logger)
            guard let row = rows.first else { return nil }
            let (tenantID, kid, sealed) = try row.decode((UUID, String, Data).self)
            return (tenantID, kid, sealed)
        }
    }
}

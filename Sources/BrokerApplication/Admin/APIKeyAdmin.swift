import BrokerCore
import Foundation
import Storage

public struct APIKeyAdmin: Sendable {
    package let database: Database
    package let actor: String

    public init(database: Database, actor: String) {
        self.database = database
        self.actor = actor
    }

    /// Creates a key; the plaintext is returned once and never stored.
    public func create(tenant slug: String, name: String?, scopes: [String], now: Date = Date()) async throws
        -> (record: APIKeyRecord, key: String)
    {
        let tenant = try await TenantAdmin.find(slug, in: database)
        let scopes = try APIKeyScope.parseList(scopes)
        let name = name?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "default"
        guard (1...100).contains(name.count) else {
            throw BrokerError.invalidArgument("The key name must be 1 to 100 characters.")
        }
        try FreeText.require(name, option: "--name")
        let token = APIKeyToken.generate()
        let record = APIKeyRecord(
            id: UUID(), tenantID: tenant.id, name: name, prefix: token.prefix, scopes: scopes,
            createdAt: now, lastUsedAt: nil, revokedAt: nil)
        try await database.apiKeys.insert(record, hash: token.hash, actor: actor)
        return (record, token.value)
    }

    public func list(tenant slug: String) async throws -> [APIKeyRecord] {
        let tenant = try await TenantAdmin.find(slug, in: database)
        return try await database.apiKeys.list(tenantID: tenant.id)
    }

    public func revoke(tenant slug: String, id: String) async throws -> APIKeyRecord {
        let tenant = try await TenantAdmin.find(slug, in: database)
        guard let uuid = UUID(uuidString: id) else {
            throw BrokerError.invalidArgument(
                "'\(id.prefix(60))' is not an API key id (a UUID).",
                hint: "The id is shown by 'broker api-key list --tenant \(slug)'.")
        }
        guard let record = try await database.apiKeys.revoke(tenantID: tenant.id, id: uuid, actor: actor) else {
            throw BrokerError.apiKeyNotFound(id)
        }
        return record
    }
}

extension TenantAdmin {
    package static func find(_ slug: String, in database: Database) async throws -> Tenant {
        guard let tenant = try await database.tenants.find(slug: slug) else { throw BrokerError.tenantNotFound(slug) }
        return tenant
    }
}

import BrokerCore
import Foundation
import Storage
import TestSupport
import Testing

@Suite struct RepositoryTests {
    @Test func tenantsRoundTripAndSlugsAreUnique() async throws {
        try await TestDatabase.withFresh { database, _ in
            let (tenant, key) = try TestDatabase.makeTenant("acme")
            let created = try await database.tenants.create(tenant, firstKey: key, actor: "test")
            #expect(created.slug == tenant.slug && created.session == .default)
            #expect(try await database.tenants.find(slug: "acme")?.id == tenant.id)
            #expect(try await database.tenants.find(slug: "nobody") == nil)

            let (duplicate, duplicateKey) = try TestDatabase.makeTenant("acme")
            await #expect(throws: StorageConflict.tenantExists(tenant.slug)) {
                try await database.tenants.create(duplicate, firstKey: duplicateKey, actor: "test")
            }
            #expect(try await database.tenants.list().count == 1)
            #expect(try await database.signingKeys.list(tenantID: tenant.id).map(\.kid) == [key.kid])

            let disabled = try await database.tenants.setStatus(slug: "acme", .disabled, actor: "test")
            #expect(disabled?.status == .disabled)
            let actions = try await database.auditLog.entries(tenantID: tenant.id).map(\.action)
            #expect(actions == ["tenant.create", "tenant.disable"])
        }
    }

    @Test func apiKeysAuthenticateByHashOnlyWhileNotRevoked() async throws {
        try await TestDatabase.withFresh { database, _ in
            let (tenant, key) = try TestDatabase.makeTenant("keys-tenant")
            _ = try await database.tenants.create(tenant, firstKey: key, actor: "test")
            let token = APIKeyToken.generate()
            let record = APIKeyRecord(
                id: UUID(), tenantID: tenant.id, name: "k", prefix: token.prefix, scopes: [.tenant], createdAt: Date(),
                lastUsedAt: nil, revokedAt: nil)
            try await database.apiKeys.insert(record, hash: token.hash, actor: "test")

            let found = try #require(try await database.apiKeys.authenticate(hash: token.hash))
            #expect(found.0.id == record.id && found.1.id == tenant.id && found.0.scopes == [.tenant])
            #expect(try await database.apiKeys.authenticate(hash: APIKeyToken.generate().hash) == nil)

            // Another tenant cannot revoke it.
            let (other, otherKey) = try TestDatabase.makeTenant("other-tenant")
            _ = try await database.tenants.create(other, firstKey: otherKey, actor: "test")
            #expect(try await database.apiKeys.revoke(tenantID: other.id, id: record.id, actor: "test") == nil)

            let revoked = try #require(try await database.apiKeys.revoke(tenantID: tenant.id, id: record.id, actor: "test"))
            #expect(revoked.revokedAt != nil)
            #expect(try await database.apiKeys.authenticate(hash: token.hash) == nil)
            #expect(try await database.apiKeys.list(tenantID: tenant.id).first?.revokedAt != nil)
        }
    }
}

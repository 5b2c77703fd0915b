import BrokerCore
import Foundation
import PostgresNIO
import Storage
import TestSupport
import Testing

/// Migration 0006: clients registered before it keep signing in without a nonce; clients added
/// after it require one unless told otherwise.
@Suite struct ClientNonceMigrationTests {
    @Test func existingClientsStayOptionalAndNewOnesRequireANonce() async throws {
        try await TestDatabase.withFresh(migrated: false) { database, _ in
            let before = try Migration.bundled().filter { $0.version < 6 }
            try await database.migrator(migrations: before).migrate()
            // Raw rows: the repositories read columns of later migrations.
            let tenantID = UUID()
            try await database.client.query(
                "INSERT INTO tenants (id, slug, display_name) VALUES (\(tenantID), 'acme', 'acme')", logger: TestDatabase.logger)
            let team = UUID()
            let group = UUID()
            try await database.client.query(
                "INSERT INTO apple_teams (id, tenant_id, team_id) VALUES (\(team), \(tenantID), 'TEAM000001')",
                logger: TestDatabase.logger)
            try await database.client.query(
                "INSERT INTO apple_app_groups (id, tenant_id, team_ref, primary_app_id) VALUES (\(group), \(tenantID), \(team), 'com.acme.app')",
                logger: TestDatabase.logger)
            try await database.client.query(
                "INSERT INTO apple_clients (id, tenant_id, group_id, client_id, kind) VALUES (\(UUID()), \(tenantID), \(group), 'com.acme.app', 'app')",
                logger: TestDatabase.logger)

            try await database.migrator().migrate()
            try await database.client.query(
                """
                INSERT INTO apple_clients (id, tenant_id, group_id, client_id, kind, platforms)
                VALUES (\(UUID()), \(tenantID), \(group), 'com.acme.new', 'app', ARRAY['ios'])
                """,
                logger: TestDatabase.logger)
            let clients = try await database.apple.clients(tenantID: tenantID)
            #expect(clients.first { $0.clientID == "com.acme.app" }?.nonceRequired == false)
            #expect(clients.first { $0.clientID == "com.acme.new" }?.nonceRequired == true)
            // Migration 0009: an App ID registered before it counts for iOS.
            #expect(clients.first { $0.clientID == "com.acme.app" }?.platforms == [.ios])
        }
    }
}

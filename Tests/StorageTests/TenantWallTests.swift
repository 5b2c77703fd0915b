import BrokerCore
import Foundation
import PostgresNIO
import Testing
import TestSupport

@testable import Storage

/// The tenant wall (decision 0055, migration 0028): row-level security, forced, on every table
/// that holds a tenant's rows, read through the scope each statement's connection is given.
/// These tests run statements as the role `broker serve` runs as, which the wall applies to,
/// with the scope set per connection (the default) and per transaction
/// (`BROKER_DB_TENANT_SCOPE=transaction`, behind a pooler in transaction mode).
@Suite struct TenantWallTests {
    /// Two tenants, each with an API key, written by the superuser (who sees through the wall).
    private func twoTenants(_ admin: Database) async throws -> (a: UUID, b: UUID) {
        let a = try await TestDatabase.createTenant("wall-a", in: admin)
        let b = try await TestDatabase.createTenant("wall-b", in: admin)
        for tenant in [a, b] {
            try await admin.client.query(
                """
                INSERT INTO accounts (id, tenant_id, status, created_at, updated_at)
                VALUES (\(UUID()), \(tenant.id), 'active', now(), now())
                """, logger: TestDatabase.logger)
        }
        return (a.id, b.id)
    }

    /// Tenant ids of every account the statement sees, as the serving role, in `scope`.
    private func accountTenants(_ serving: Database, _ scope: TenantScope?) async throws -> Set<UUID> {
        try await TenantScope.with(scope) {
            // No tenant filter: the statement that forgot one.
            let rows = try await serving.client.rows("SELECT tenant_id FROM accounts", logger: TestDatabase.logger)
            return Set(try rows.map { try $0.decode(UUID.self) })
        }
    }

    @Test func everyTableThatHoldsATenantsRowsHasTheWallForced() async throws {
        try await TestDatabase.withFresh { database, _ in
            let rows = try await database.client.rows(
                """
                SELECT c.relname::text FROM pg_class c
                WHERE c.relkind IN ('r', 'p') AND c.relnamespace = current_schema()::regnamespace
                    AND (c.relname = 'tenants' OR EXISTS (
                        SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped))
                    AND NOT (c.relrowsecurity AND c.relforcerowsecurity
                        AND EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid AND p.polname = 'tenant_wall'))
                ORDER BY 1
                """, logger: TestDatabase.logger)
            let unwalled = try rows.map { try $0.decode(String.self) }
            #expect(unwalled == [], "tables holding tenants' rows without the forced tenant wall")
            let walled = try await database.client.rows(
                "SELECT count(*) FROM pg_class WHERE relforcerowsecurity AND relnamespace = current_schema()::regnamespace",
                logger: TestDatabase.logger)
            #expect(try walled.first?.decode(Int.self) ?? 0 >= 23)
        }
    }

    @Test func theServingRoleIsNoSuperuserAndCannotBypassTheWall() async throws {
        try await TestDatabase.withFreshServing { _, serving, _ in
            let rows = try await serving.client.rows(
                "SELECT rolsuper, rolbypassrls, has_schema_privilege(current_schema(), 'CREATE') FROM pg_roles WHERE rolname = current_user",
                logger: TestDatabase.logger)
            let (superuser, bypass, create) = try #require(rows.first).decode((Bool, Bool, Bool).self)
            #expect(!superuser && !bypass && !create)
        }
    }

    @Test(arguments: [false, true]) func aStatementThatForgetsItsTenantSeesOnlyItsScopesRows(perTransaction: Bool) async throws {
        try await TestDatabase.withFreshServing(perTransaction: perTransaction) { admin, serving, _ in
            let (a, b) = try await twoTenants(admin)
            #expect(try await accountTenants(serving, .tenant(a)) == [a])
            #expect(try await accountTenants(serving, .tenant(b)) == [b])
            #expect(try await accountTenants(serving, .allTenants) == [a, b])
            // No scope: nothing, not everything.
            #expect(try await accountTenants(serving, nil) == [])
            // One connection switching scopes is told each time (the per-connection record), or
            // each statement sets its own (per transaction).
            for _ in 0..<3 {
                #expect(try await accountTenants(serving, .tenant(a)) == [a])
                #expect(try await accountTenants(serving, nil) == [])
            }
            if perTransaction {
                // The scope lived in the statements' transactions only: no session keeps it
                // for the next client of a pooler's server connection.
                _ = try await accountTenants(serving, .tenant(b))
                let left = try await serving.client.query(
                    "SELECT coalesce(current_setting('broker.tenant_id', true), '')", logger: TestDatabase.logger
                ).collect().first?.decode(String.self)
                #expect(left == "")
            }
        }
    }

    @Test(arguments: [false, true]) func aWriteIntoAnotherTenantsRowsIsRefusedAndChangesNothing(perTransaction: Bool) async throws {
        try await TestDatabase.withFreshServing(perTransaction: perTransaction) { admin, serving, _ in
            let (a, b) = try await twoTenants(admin)
            // An insert for tenant b while in tenant a's scope breaks the policy.
            await #expect(throws: PSQLError.self) {
                try await TenantScope.tenant(a) {
                    _ = try await serving.client.rows(
                        "INSERT INTO accounts (id, tenant_id, status, created_at, updated_at) VALUES (\(UUID()), \(b), 'active', now(), now())",
                        logger: TestDatabase.logger)
                }
            }
            // An update without a tenant filter touches only the scope's rows.
            let updated = try await TenantScope.tenant(a) {
                try await serving.client.rows("UPDATE accounts SET display_name = 'x' RETURNING tenant_id", logger: TestDatabase.logger)
            }
            #expect(try updated.map { try $0.decode(UUID.self) } == [a])
            let rows = try await admin.client.rows(
                "SELECT count(*) FROM accounts WHERE tenant_id = \(b) AND display_name IS NULL", logger: TestDatabase.logger)
            #expect(try rows.first?.decode(Int.self) == 1)
        }
    }

    @Test(arguments: [false, true]) func aTransactionRunsInTheScopeItStartedIn(perTransaction: Bool) async throws {
        try await TestDatabase.withFreshServing(perTransaction: perTransaction) { admin, serving, _ in
            let (a, _) = try await twoTenants(admin)
            let seen = try await TenantScope.tenant(a) {
                try await serving.client.transaction(logger: TestDatabase.logger) { connection in
                    try await connection.query("SELECT tenant_id FROM accounts", logger: TestDatabase.logger).collect()
                        .map { try $0.decode(UUID.self) }
                }
            }
            #expect(seen == [a])
        }
    }

    @Test func aBatchOfOneTenantsWorkKeepsThatTenantsScope() async throws {
        let a = UUID()
        let b = UUID()
        #expect(await TenantScope.shared(by: [a, a], because: "test") { TenantScope.current } == .tenant(a))
        #expect(await TenantScope.shared(by: [a, b], because: "test") { TenantScope.current } == .allTenants)
        #expect(await TenantScope.shared(by: [UUID](), because: "test") { TenantScope.current } == .allTenants)
    }

    @Test func aRequestSettlesOnOneTenantOnly() async throws {
        let a = UUID()
        await TenantScope.request {
            #expect(TenantScope.current == nil)
            #expect(RequestTenantScope.settle(a))
            #expect(TenantScope.current == .tenant(a))
            // A second tenant is refused; the first stays.
            #expect(!RequestTenantScope.settle(UUID()))
            #expect(TenantScope.current == .tenant(a))
            // Work started from the request (a child task) sees its scope.
            let child = await Task { TenantScope.current }.value
            #expect(child == .tenant(a))
        }
    }

    @Test(arguments: [false, true]) func importsWriteThroughTheWall(perTransaction: Bool) async throws {
        try await TestDatabase.withFreshServing(perTransaction: perTransaction) { admin, serving, _ in
            let tenant = try await TestDatabase.createTenant("wall-import", in: admin)
            let rows = [
                ImportRow(
                    externalID: "ext-1", email: "one@example.com", emailVerified: true, isPrivateEmail: false,
                    name: PersonName(givenName: nil, familyName: nil), status: .active, createdAt: nil,
                    identities: [
                        ImportRowIdentity(
                            provider: "google", providerScope: "", subject: "g-1", email: nil, emailVerified: false, isPrivateEmail: false)
                    ])
            ]
            let outcomes = try await TenantScope.tenant(tenant.id) { try await serving.imports.write(rows, tenantID: tenant.id) }
            #expect(outcomes.count == 1)
            let count = try await admin.client.rows(
                "SELECT count(*) FROM identities WHERE tenant_id = \(tenant.id) AND subject = 'g-1'", logger: TestDatabase.logger)
            #expect(try count.first?.decode(Int.self) == 1)
        }
    }
}

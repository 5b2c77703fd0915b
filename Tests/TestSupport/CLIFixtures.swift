import Foundation
import PostgresNIO
import Storage

/// Rows the CLI tests start from.
public enum CLIFixtures {
    /// An account of tenant `acme` with one Apple identity and one live session; its given name
    /// carries a terminal escape, as a provider could send it.
    public static func seedAccount(_ database: Database) async throws -> (account: UUID, session: UUID) {
        let (account, identity, session) = (UUID(), UUID(), UUID())
        _ = try await database.client.query(
            """
            WITH tenant AS (SELECT id FROM tenants WHERE slug = 'acme'),
            account AS (
                INSERT INTO accounts (id, tenant_id, given_name, family_name, email, email_verified)
                SELECT \(account), id, \("Ada\u{1B}[2J"), 'Lovelace', 'ada@example.com', true FROM tenant RETURNING id, tenant_id),
            identity AS (
                INSERT INTO identities (id, tenant_id, account_id, provider, provider_scope, subject, email, email_verified)
                SELECT \(identity), tenant_id, id, 'apple', 'TEAM000001', '001.cli', 'ada@example.com', true FROM account
                RETURNING id, tenant_id, account_id)
            INSERT INTO sessions (id, tenant_id, account_id, identity_id, idp, expires_at)
            SELECT \(session), tenant_id, account_id, id, 'apple', now() + interval '1 day' FROM identity
            """
        ).collect()
        return (account, session)
    }
}

import Foundation
import PostgresNIO
import Storage
import TestSupport
import Testing

/// `broker account delete` and `broker apple revocations list|retry` (issue 23 §2), as an
/// operator runs them.
@Suite struct AccountDeletionCLITests {
    @Test func deleteAnAccountThenListAndRetryRevocations() async throws {
        try await TestDatabase.withFresh { database, url in
            let cli = BrokerCLI(databaseURL: url)
            #expect(try await cli.run("tenant", "create", "acme").status == 0)
            let (account, session) = try await CLIFixtures.seedAccount(database)
            let id = account.uuidString.lowercased()

            let bad = try await cli.run("account", "delete", "--tenant", "acme", id, "--reason", "")
            #expect(bad.status == 1)
            #expect(bad.output.contains("--reason must be one line"), "\(bad.output)")
            let deleted = try await cli.run("account", "delete", "--tenant", "acme", id, "--reason", "support ticket 42", "--json")
            #expect(deleted.status == 0, "\(deleted.output)")
            let body = try deleted.object()
            #expect(body["deleted"] as? Bool == true)
            #expect(body["revoked_sessions"] as? Int == 1)
            #expect(body["deleted_identities"] as? Int == 1)
            #expect(body["apple_revocations_queued"] as? Int == 0, "the seeded identity holds no Apple token")
            let revoked = try await database.client.query(
                "SELECT revoke_reason FROM sessions WHERE id = \(session)"
            ).collect().first?.decode(String?.self)
            #expect(revoked == "account_deleted")
            let shown = try await cli.run("account", "show", "--tenant", "acme", id, "--json").object()
            #expect(shown["status"] as? String == "deleted")
            #expect(shown["email"] is NSNull)
            let again = try await cli.run("account", "delete", "--tenant", "acme", id)
            #expect(again.status == 1)
            #expect(again.output.contains("This tenant has no account"), "\(again.output)")
            let audit = try await cli.run("audit", "list", "--tenant", "acme", "--action", "account", "--json").array()
            #expect(audit.first?["action"] as? String == "account.deleted")

            #expect(try await cli.run("apple", "revocations", "list", "--tenant", "acme", "--json").array().isEmpty)
            let none = try await cli.run("apple", "revocations", "list", "--tenant", "acme")
            #expect(none.output.contains("has no Apple revocations"), "\(none.output)")

            // A revocation Apple kept refusing, as the worker leaves it.
            let revocation = UUID()
            _ = try await database.client.query(
                """
                INSERT INTO apple_revocations (id, tenant_id, account_id, team_id, client_id, token_sealed, status, attempts, last_error)
                SELECT \(revocation), id, \(account), 'TEAM000001', 'com.acme.app', '\\x00'::bytea, 'failed', 30, 'apple_invalid_client'
                FROM tenants WHERE slug = 'acme'
                """
            ).collect()
            let failed = try await cli.run("apple", "revocations", "list", "--tenant", "acme", "--status", "failed", "--json").array()
            #expect(failed.count == 1)
            #expect(failed.first?["id"] as? String == revocation.uuidString.lowercased())
            #expect(failed.first?["last_error"] as? String == "apple_invalid_client")
            #expect(failed.first?["done_at"] is NSNull)
            #expect(failed.first?["token"] == nil && failed.first?["token_sealed"] == nil, "never a token")
            let table = try await cli.run("apple", "revocations", "list", "--tenant", "acme")
            #expect(table.output.contains("failed") && table.output.contains("apple_invalid_client"), "\(table.output)")
            #expect(try await cli.run("apple", "revocations", "list", "--tenant", "acme", "--status", "done", "--json").array().isEmpty)
            let wrongStatus = try await cli.run("apple", "revocations", "list", "--tenant", "acme", "--status", "stuck")
            #expect(wrongStatus.status == 1)
            #expect(wrongStatus.output.contains("--status pending"), "\(wrongStatus.output)")

            let unknown = try await cli.run("apple", "revocations", "retry", "--tenant", "acme", UUID().uuidString)
            #expect(unknown.status == 1)
            #expect(unknown.output.contains("broker apple revocations list --tenant acme"), "\(unknown.output)")
            let notAnID = try await cli.run("apple", "revocations", "retry", "--tenant", "acme", "x")
            #expect(notAnID.status == 1)
            let retried = try await cli.run("apple", "revocations", "retry", "--tenant", "acme", "--json")
            #expect(retried.status == 0, "\(retried.output)")
            #expect(try retried.object()["requeued"] as? [String] == [revocation.uuidString.lowercased()])
            let pending = try await cli.run("apple", "revocations", "list", "--tenant", "acme", "--status", "pending", "--json").array()
            #expect(pending.first?["attempts"] as? Int == 0)
            let nothing = try await cli.run("apple", "revocations", "retry", "--tenant", "acme")
            #expect(nothing.output.contains("no failed Apple revocations"), "\(nothing.output)")
        }
    }
}

import Foundation
import PostgresNIO
import Storage
import TestSupport
import Testing

/// `broker account show|disable|enable` (issue 20 §4): the same service as the HTTP routes, as
/// an operator runs it.
@Suite struct AccountCLITests {
    @Test func showDisableAndEnableAnAccount() async throws {
        try await TestDatabase.withFresh { database, url in
            let cli = BrokerCLI(databaseURL: url)
            #expect(try await cli.run("tenant", "create", "acme").status == 0)
            let (account, session) = try await CLIFixtures.seedAccount(database)
            let id = account.uuidString.lowercased()

            let shown = try await cli.run("account", "show", "--tenant", "acme", id, "--json")
            #expect(shown.status == 0, "\(shown.output)")
            let body = try shown.object()
            #expect(body["id"] as? String == id)
            #expect(body["tenant"] as? String == "acme")
            #expect(body["status"] as? String == "active")
            #expect(body["email"] as? String == "ada@example.com")
            #expect((body["identities"] as? [[String: Any]])?.first?["subject"] as? String == "001.cli")
            #expect(body["changed"] == nil)
            let text = try await cli.run("account", "show", "--tenant", "acme", id)
            #expect(text.status == 0)
            #expect(text.output.contains("status:      active"))
            #expect(text.output.contains("001.cli"))
            #expect(text.output.contains("Ada\\u{1B}[2J Lovelace"), "\(text.output)")
            #expect(!text.output.contains("\u{1B}"), "a provider's text cannot drive the terminal")

            let disabled = try await cli.run("account", "disable", "--tenant", "acme", id, "--json")
            #expect(disabled.status == 0, "\(disabled.output)")
            let after = try disabled.object()
            #expect(after["status"] as? String == "disabled")
            #expect(after["changed"] as? Bool == true)
            #expect(after["revoked_sessions"] as? Int == 1)
            let revoked = try await database.client.query(
                "SELECT revoke_reason FROM sessions WHERE id = \(session)"
            ).collect().first?.decode(String?.self)
            #expect(revoked == "account_disabled")

            let again = try await cli.run("account", "disable", "--tenant", "acme", id)
            #expect(again.status == 0)
            #expect(again.output.contains("already disabled; nothing changed"), "\(again.output)")
            let againJSON = try await cli.run("account", "disable", "--tenant", "acme", id, "--json").object()
            #expect(againJSON["changed"] as? Bool == false)
            #expect(againJSON["revoked_sessions"] as? Int == 0)

            let enabled = try await cli.run("account", "enable", "--tenant", "acme", id)
            #expect(enabled.status == 0, "\(enabled.output)")
            #expect(enabled.output.contains("can sign in again"))
            #expect(try await cli.run("account", "show", "--tenant", "acme", id, "--json").object()["status"] as? String == "active")

            // One audit row per change, by the operator, naming the account.
            let audit = try await cli.run("audit", "list", "--tenant", "acme", "--action", "account", "--json").array()
            #expect(audit.compactMap { $0["action"] as? String } == ["account.enabled", "account.disabled"])
            #expect(audit.allSatisfy { ($0["actor"] as? String)?.hasPrefix("cli:") == true })
            #expect(audit.allSatisfy { $0["account_id"] as? String == id && $0["target"] as? String == id })
            let byAccount = try await cli.run("audit", "list", "--tenant", "acme", "--account", id, "--json").array()
            #expect(byAccount.contains { $0["action"] as? String == "account.disabled" })
        }
    }

    @Test func unknownAccountsAndTenantsSayWhatToDo() async throws {
        try await TestDatabase.withFresh { database, url in
            let cli = BrokerCLI(databaseURL: url)
            #expect(try await cli.run("tenant", "create", "acme").status == 0)
            #expect(try await cli.run("tenant", "create", "bravo").status == 0)
            let (account, _) = try await CLIFixtures.seedAccount(database)

            for command in ["show", "disable", "enable"] {
                let unknown = try await cli.run("account", command, "--tenant", "acme", UUID().uuidString)
                #expect(unknown.status == 1, "\(command)")
                #expect(unknown.output.contains("error: This tenant has no account"))
                #expect(unknown.output.contains("hint:"))
                let foreign = try await cli.run("account", command, "--tenant", "bravo", account.uuidString, "--json")
                #expect(foreign.status == 1)
                #expect(foreign.output.contains("\"code\":\"account_not_found\""), "\(foreign.output)")
                let noTenant = try await cli.run("account", command, "--tenant", "nobody", account.uuidString)
                #expect(noTenant.status == 1)
                #expect(noTenant.output.contains("broker tenant list"))
                #expect(try await cli.run("account", command, account.uuidString).status == 64, "--tenant is required")
            }
            let status = try await database.client.query(
                "SELECT status FROM accounts WHERE id = \(account)"
            ).collect().first?.decode(String.self)
            #expect(status == "active")
        }
    }
}

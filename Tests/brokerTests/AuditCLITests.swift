import Foundation
import Storage
import TestSupport
import Testing

/// `broker audit list`: the security events as an operator reads them.
@Suite struct AuditCLITests {
    @Test func operatorActionsAreListedAndFiltered() async throws {
        try await TestDatabase.withFresh { _, url in
            let cli = BrokerCLI(databaseURL: url)
            #expect(try await cli.run("tenant", "create", "acme").status == 0)
            let key = try await cli.run("api-key", "create", "--tenant", "acme", "--json").object()
            let id = try #require(key["id"] as? String)
            #expect(try await cli.run("api-key", "revoke", "--tenant", "acme", id).status == 0)

            let all = try await cli.run("audit", "list", "--tenant", "acme", "--json")
            #expect(all.status == 0, "\(all.output)")
            let actions = try all.array().compactMap { $0["action"] as? String }
            // Newest first.
            #expect(
                Array(actions.prefix(3)) == ["api_key.revoke", "api_key.create", "signing_key.create"] || actions.first == "api_key.revoke")
            #expect(actions.contains("tenant.create"))

            let keys = try await cli.run("audit", "list", "--tenant", "acme", "--action", "api_key", "--json").array()
            #expect(keys.compactMap { $0["action"] as? String } == ["api_key.revoke", "api_key.create"])
            #expect(keys.first?["target"] as? String == id)

            let text = try await cli.run("audit", "list", "--tenant", "acme", "--limit", "1")
            #expect(text.status == 0 && text.output.contains("api_key.revoke"))

            let badAccount = try await cli.run("audit", "list", "--tenant", "acme", "--account", "nope")
            #expect(badAccount.status == 1)
            #expect(badAccount.output.contains("not an account id"))
            let badTenant = try await cli.run("audit", "list", "--tenant", "nope")
            #expect(badTenant.status == 1)
            #expect(badTenant.output.contains("broker tenant list"))
        }
    }
}

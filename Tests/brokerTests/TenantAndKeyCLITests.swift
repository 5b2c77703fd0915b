import BrokerCore
import Foundation
import Storage
import TestSupport
import Testing

/// The admin CLI against an existing PostgreSQL (DATABASE_URL), as an operator runs it.
@Suite struct TenantAndKeyCLITests {
    @Test func tenantRoundTrip() async throws {
        try await TestDatabase.withFresh { _, url in
            let cli = BrokerCLI(databaseURL: url)
            let created = try await cli.run("tenant", "create", "acme", "--name", "Acme Inc", "--json")
            #expect(created.status == 0, "\(created.output)")
            let tenant = try created.object()
            #expect(tenant["slug"] as? String == "acme")
            #expect(tenant["name"] as? String == "Acme Inc")
            #expect(tenant["status"] as? String == "active")

            let list = try await cli.run("tenant", "list", "--json")
            #expect(try list.array().map { $0["slug"] as? String } == ["acme"])
            let text = try await cli.run("tenant", "list")
            #expect(text.output.contains("acme") && text.output.contains("Acme Inc"))

            let shown = try await cli.run("tenant", "show", "acme", "--json")
            #expect(try shown.object()["id"] as? String == tenant["id"] as? String)

            let disabled = try await cli.run("tenant", "disable", "acme", "--json")
            #expect(try disabled.object()["status"] as? String == "disabled")
            #expect(try await cli.run("tenant", "enable", "acme").status == 0)

            // The first signing key exists and is active.
            let keys = try await cli.run("keys", "list", "--tenant", "acme", "--json")
            #expect(try keys.array().map { $0["state"] as? String } == ["active"])
        }
    }

    @Test func aTenantsAPIKeyRateFromTheCLI() async throws {
        try await TestDatabase.withFresh { database, url in
            let cli = BrokerCLI(databaseURL: url)
            #expect(try await cli.run("tenant", "create", "acme").status == 0)
            let shown = try await cli.run("tenant", "show", "acme", "--json").object()
            #expect(shown["rate_limit"] is NSNull && shown["rate_burst"] is NSNull, "always present; null: the instance's default")

            let set = try await cli.run("tenant", "set", "--tenant", "acme", "--rate-limit", "500", "--json")
            #expect(set.status == 0, "\(set.output)")
            #expect(try set.object()["rate_limit"] as? Int == 500)
            #expect(try set.object()["rate_burst"] as? Int == 1_000, "twice the rate unless given")
            let both = try await cli.run("tenant", "set", "--tenant", "acme", "--rate-limit", "50", "--burst", "80")
            #expect(both.status == 0 && both.output.contains("50/s, burst 80"), "\(both.output)")

            for bad in [
                ["--rate-limit", "10", "--burst", "5"], ["--burst", "5"], ["--rate-limit", "fast"], ["--rate-limit", "0"],
                ["--rate-limit", "default", "--burst", "5"],
            ] {
                let refused = try await cli.run(["tenant", "set", "--tenant", "acme"] + bad)
                #expect(refused.status == 1, "\(bad)")
                #expect(refused.output.contains("--rate-limit") || refused.output.contains("--burst"), "\(refused.output)")
            }
            #expect(
                try await database.tenants.find(slug: "acme")?.rateLimit == RateLimit(perSecond: 50, burst: 80), "refusals change nothing")

            let back = try await cli.run("tenant", "set", "--tenant", "acme", "--rate-limit", "default", "--json")
            #expect(try back.object()["rate_limit"] is NSNull)
            #expect(try await database.tenants.find(slug: "acme")?.rateLimit == nil)
            let missing = try await cli.run("tenant", "set", "--tenant", "nobody", "--rate-limit", "5")
            #expect(missing.status == 1 && missing.output.contains("broker tenant list"))
        }
    }

    @Test func aTenantsSessionCapFromTheCLI() async throws {
        try await TestDatabase.withFresh { database, url in
            let cli = BrokerCLI(databaseURL: url)
            #expect(try await cli.run("tenant", "create", "acme").status == 0)
            #expect(try await cli.run("tenant", "show", "acme", "--json").object()["max_sessions_per_account"] as? Int == 100)
            let set = try await cli.run("tenant", "set", "--tenant", "acme", "--max-sessions-per-account", "5", "--json")
            #expect(set.status == 0, "\(set.output)")
            #expect(try set.object()["max_sessions_per_account"] as? Int == 5)
            let shown = try await cli.run("tenant", "show", "acme")
            #expect(shown.output.contains("at most 5"), "\(shown.output)")
            for bad in ["0", "10001", "many"] {
                let refused = try await cli.run("tenant", "set", "--tenant", "acme", "--max-sessions-per-account", bad)
                #expect(refused.status != 0 && refused.output.contains("--max-sessions-per-account"), "\(bad): \(refused.output)")
            }
            #expect(try await database.tenants.find(slug: "acme")?.session.maxSessionsPerAccount == 5, "refusals change nothing")
            let audit = try await database.auditLog.entries(tenantID: try #require(try await database.tenants.find(slug: "acme")).id)
            #expect(audit.filter { $0.action == "tenant.set" }.count == 1, "the change is audited")
        }
    }

    @Test func badAndDuplicateSlugsAreRefusedClearly() async throws {
        try await TestDatabase.withFresh { database, url in
            let cli = BrokerCLI(databaseURL: url)
            for bad in ["Acme", "ab", "acme_prod", "-acme", String(repeating: "x", count: 41)] {
                let result = try await cli.run("tenant", "create", "--", bad)
                #expect(result.status == 1, "\(bad)")
                #expect(result.output.contains("is not a valid tenant slug"))
                #expect(result.output.contains("hint:"))
            }
            #expect(try await database.tenants.list().isEmpty)

            #expect(try await cli.run("tenant", "create", "acme").status == 0)
            let duplicate = try await cli.run("tenant", "create", "acme")
            #expect(duplicate.status == 1)
            #expect(duplicate.output.contains("already exists"))
            let json = try await cli.run("tenant", "create", "acme", "--json")
            #expect(json.output.contains("\"code\":\"tenant_exists\""))

            let missing = try await cli.run("tenant", "show", "nobody")
            #expect(missing.status == 1 && missing.output.contains("broker tenant list"))
        }
    }

    @Test func apiKeyRoundTrip() async throws {
        try await TestDatabase.withFresh { _, url in
            let cli = BrokerCLI(databaseURL: url)
            #expect(try await cli.run("tenant", "create", "acme").status == 0)

            // Plain output: the key alone on stdout (the note goes to stderr).
            let plain = try await cli.run("api-key", "create", "--tenant", "acme", "--name", "backend")
            #expect(plain.status == 0)
            #expect(plain.output.split(separator: "\n").contains { $0.hasPrefix("ibk_") && $0.count == 48 })

            let created = try await cli.run("api-key", "create", "--tenant", "acme", "--scopes", "sessions", "tenant", "--json")
            let body = try created.object()
            let key = try #require(body["key"] as? String)
            let id = try #require(body["id"] as? String)
            #expect(body["scopes"] as? [String] == ["sessions", "tenant"])

            let listed = try await cli.run("api-key", "list", "--tenant", "acme", "--json")
            let keys = try listed.array()
            #expect(keys.count == 2)
            #expect(!listed.output.contains(key))
            #expect(keys.contains { $0["id"] as? String == id && key.hasPrefix($0["prefix"] as? String ?? "-") })

            let revoked = try await cli.run("api-key", "revoke", "--tenant", "acme", id, "--json")
            #expect(revoked.status == 0)
            #expect(try revoked.object()["revoked_at"] != nil)
            let after = try await cli.run("api-key", "list", "--tenant", "acme", "--json").array()
            #expect(after.first { $0["id"] as? String == id }?["revoked_at"] != nil)

            #expect(try await cli.run("api-key", "revoke", "--tenant", "acme", "not-a-uuid").status == 1)
            #expect(try await cli.run("api-key", "create", "--tenant", "acme", "--scopes", "root").status == 1)
            #expect(try await cli.run("api-key", "list", "--tenant", "nobody").status == 1)
        }
    }

    @Test func keyRotationFromTheCLI() async throws {
        try await TestDatabase.withFresh { _, url in
            let cli = BrokerCLI(databaseURL: url)
            #expect(try await cli.run("tenant", "create", "acme").status == 0)
            let rotated = try await cli.run("keys", "rotate", "--tenant", "acme", "--json").object()
            #expect(rotated["state"] as? String == "next")
            let states = try await cli.run("keys", "list", "--tenant", "acme", "--json").array().compactMap { $0["state"] as? String }
            #expect(states.sorted() == ["active", "next"])
            // A kid is a base64url thumbprint: one in 64 starts with '-', which only '--' keeps an argument.
            let retired = try await cli.run("keys", "retire", "--tenant", "acme", "--json", "--", rotated["kid"] as? String ?? "")
            #expect(retired.status == 0)
            #expect(try retired.array().compactMap { $0["state"] as? String }.sorted() == ["active", "retired"])
            // After '--' a kid starting with '-' is the argument: an unknown key (1), not a usage error (64).
            #expect(try await cli.run("keys", "retire", "--tenant", "acme", "--", "-no-such-kid").status == 1)
        }
    }

    @Test func keyRevocationFromTheCLI() async throws {
        try await TestDatabase.withFresh { _, url in
            let cli = BrokerCLI(databaseURL: url)
            #expect(try await cli.run("tenant", "create", "acme").status == 0)
            let active = try #require(try await cli.run("keys", "list", "--tenant", "acme", "--json").array().first)
            let kid = try #require(active["kid"] as? String)
            let revoked = try await cli.run("keys", "revoke", "--tenant", "acme", "--json", "--", kid)
            #expect(revoked.status == 0)
            let keys = try revoked.array()
            #expect(keys.compactMap { $0["state"] as? String }.sorted() == ["active", "revoked"], "a successor made at once")
            let entry = try #require(keys.first { $0["kid"] as? String == kid })
            #expect(entry["revoked_at"] is String)
            #expect(keys.allSatisfy { $0.keys.contains("revoked_at") && $0.keys.contains("retired_at") }, "members always present")
            let text = try await cli.run("keys", "revoke", "--tenant", "acme", "--", kid)
            #expect(text.status == 0)
            #expect(text.output.contains("already revoked"))
            let unknown = try await cli.run("keys", "revoke", "--tenant", "acme", "--", "-no-such-kid")
            #expect(unknown.status == 1)
        }
    }

    @Test(arguments: [
        ["--help"], ["serve", "--help"], ["db", "--help"], ["db", "migrate", "--help"], ["tenant", "create", "--help"],
        ["api-key", "create", "--help"], ["keys", "rotate", "--help"],
    ])
    func everyCommandExplainsItself(_ arguments: [String]) throws {
        let result = try BrokerCLI(databaseURL: nil).run(arguments)
        #expect(result.status == 0)
        #expect(result.output.contains("USAGE:"))
    }

    @Test func usageErrorsExitNonZero() throws {
        let result = try BrokerCLI(databaseURL: nil).run("tenant", "create")
        #expect(result.status != 0)
        #expect(result.output.contains("Missing expected argument"))
    }

    @Test func dbStatusAndMigrate() async throws {
        try await TestDatabase.withFresh(migrated: false) { _, url in
            let cli = BrokerCLI(databaseURL: url)
            // An external database is never migrated behind the operator's back.
            let refused = try await cli.run("tenant", "list")
            #expect(refused.status == 1 && refused.output.contains("broker db migrate"))
            #expect(try await cli.run("db", "status", "--json").array().allSatisfy { $0["state"] as? String == "pending" })
            #expect(try await cli.run("db", "migrate").output.contains("applied 0001_foundation"))
            #expect(try await cli.run("db", "migrate").output.contains("up to date"))
            #expect(try await cli.run("db", "status", "--json").array().allSatisfy { $0["state"] as? String == "applied" })
        }
    }
}

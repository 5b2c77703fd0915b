import Foundation
import PostgresNIO
import Storage
import TestSupport
import Testing

/// `broker webhook set|show|disable` and `broker events list|redeliver` (issue 23 §5), as an
/// operator runs them.
@Suite struct WebhookCLITests {
    @Test func setShowDisableAndTheInsecureRule() async throws {
        try await TestDatabase.withFresh { database, url in
            let cli = BrokerCLI(databaseURL: url)
            #expect(try await cli.run("tenant", "create", "acme").status == 0)

            let plain = try await cli.run("webhook", "set", "--tenant", "acme", "--url", "http://127.0.0.1:9/hooks")
            #expect(plain.status == 1)
            #expect(plain.output.contains("BROKER_WEBHOOK_ALLOW_INSECURE=1"), "\(plain.output)")
            let loopback = try await cli.run("webhook", "set", "--tenant", "acme", "--url", "https://127.0.0.1/hooks")
            #expect(loopback.status == 1)
            #expect(loopback.output.contains("not a public address"), "\(loopback.output)")
            let unknown = try await cli.run(
                "webhook", "set", "--tenant", "acme", "--url", "https://93.184.215.14/hooks", "--events", "account.created",
                "account.exploded")
            #expect(unknown.status == 1)
            #expect(unknown.output.contains("account.exploded") && unknown.output.contains("apple.consent_revoked"), "\(unknown.output)")
            let none = try await cli.run("webhook", "show", "--tenant", "acme")
            #expect(none.status == 1)
            #expect(none.output.contains("no webhook"), "\(none.output)")

            let insecure = BrokerCLI(databaseURL: url, extra: ["BROKER_WEBHOOK_ALLOW_INSECURE": "1"])
            let created = try await insecure.run(
                "webhook", "set", "--tenant", "acme", "--url", "http://127.0.0.1:9/hooks", "--events", "account.created", "account.deleted",
                "--json")
            #expect(created.status == 0, "\(created.output)")
            let body = try created.object()
            let secret = try #require(body["secret"] as? String)
            #expect(secret.hasPrefix("whsec_"))
            #expect(body["events"] as? [String] == ["account.created", "account.deleted"])
            let stored = try await database.client.query("SELECT secret_sealed FROM webhooks").collect().first?.decode(Data.self)
            #expect(stored.map { !String(decoding: $0, as: UTF8.self).contains(secret) } == true, "sealed at rest")

            let again = try await insecure.run("webhook", "set", "--tenant", "acme", "--url", "http://127.0.0.1:9/other")
            #expect(again.status == 0, "\(again.output)")
            #expect(again.output.contains("Signing secret unchanged") && !again.output.contains("whsec_"), "\(again.output)")
            let shown = try await cli.run("webhook", "show", "--tenant", "acme", "--json").object()
            #expect(shown["url"] as? String == "http://127.0.0.1:9/other")
            #expect(shown["events"] as? [String] == EventTypeNames.all, "set without --events takes every type")
            #expect(shown["secret"] == nil)
            #expect((shown["deliveries"] as? [String: Int])?["failed"] == 0)
            #expect(try await cli.run("webhook", "disable", "--tenant", "acme").status == 0)
            #expect(try await cli.run("webhook", "show", "--tenant", "acme", "--json").object()["enabled"] as? Bool == false)
            let twice = try await cli.run("webhook", "disable", "--tenant", "acme")
            #expect(twice.status == 1)
            let audit = try await cli.run("audit", "list", "--tenant", "acme", "--action", "webhook", "--json").array()
            #expect(Set(audit.compactMap { $0["action"] as? String }) == ["webhook.set", "webhook.disabled"])
            #expect(!String(describing: audit).contains(secret), "the secret is never audited")
        }
    }

    @Test func listFailedDeliveriesAndRedeliverThem() async throws {
        try await TestDatabase.withFresh { database, url in
            let cli = BrokerCLI(databaseURL: url, extra: ["BROKER_WEBHOOK_ALLOW_INSECURE": "1"])
            #expect(try await cli.run("tenant", "create", "acme").status == 0)
            #expect(try await cli.run("webhook", "set", "--tenant", "acme", "--url", "http://127.0.0.1:9/hooks").status == 0)
            // A delivery the worker gave up on, as it leaves it.
            let event = try #require(
                try await database.client.query(
                    """
                    WITH e AS (INSERT INTO events_outbox (tenant_id, event_type, payload) SELECT id, 'account.created', '{}' FROM tenants
                        RETURNING id, tenant_id, tx)
                    INSERT INTO webhook_deliveries (event_id, tenant_id, event_tx, status, attempts, last_status, last_error)
                    SELECT id, tenant_id, tx, 'failed', 30, 502, 'http_502' FROM e RETURNING event_id
                    """
                ).collect().first?.decode(Int64.self))
            let failed = try await cli.run("events", "list", "--tenant", "acme", "--status", "failed", "--json").array()
            #expect(failed.count == 1)
            #expect(failed.first?["event_id"] as? String == "evt_\(event)")
            #expect(failed.first?["last_status"] as? Int == 502)
            #expect(failed.first?["next_attempt_at"] is NSNull)
            let table = try await cli.run("events", "list", "--tenant", "acme")
            #expect(table.output.contains("evt_\(event)") && table.output.contains("http_502"), "\(table.output)")
            #expect(try await cli.run("events", "list", "--tenant", "acme", "--status", "delivered", "--json").array().isEmpty)
            let badStatus = try await cli.run("events", "list", "--tenant", "acme", "--status", "lost")
            #expect(badStatus.status == 1 && badStatus.output.contains("--status pending"), "\(badStatus.output)")

            let notAnID = try await cli.run("events", "redeliver", "--tenant", "acme", "evt_x")
            #expect(notAnID.status == 1 && notAnID.output.contains("broker events list --tenant acme"), "\(notAnID.output)")
            let missing = try await cli.run("events", "redeliver", "--tenant", "acme", "evt_\(event + 99)")
            #expect(missing.status == 1 && missing.output.contains("no webhook delivery"), "\(missing.output)")
            let redelivered = try await cli.run("events", "redeliver", "--tenant", "acme", "--json")
            #expect(redelivered.status == 0, "\(redelivered.output)")
            #expect(try redelivered.object()["redelivered"] as? [String] == ["evt_\(event)"])
            let pending = try await cli.run("events", "list", "--tenant", "acme", "--status", "pending", "--json").array()
            #expect(pending.first?["attempts"] as? Int == 0)
            let nothing = try await cli.run("events", "redeliver", "--tenant", "acme")
            #expect(nothing.output.contains("no failed webhook deliveries"), "\(nothing.output)")
        }
    }
}

/// The event types, as the CLI lists them (BrokerCore's list, spelled out: a rename is a break).
enum EventTypeNames {
    static let all = [
        "account.created", "account.deleted", "identity.linked", "identity.unlinked", "apple.consent_revoked", "apple.account_deleted",
        "apple.email_disabled", "apple.email_enabled", "import.completed",
    ]
}

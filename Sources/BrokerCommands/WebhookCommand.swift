import ArgumentParser
import BrokerApplication
import BrokerCore
import Foundation
import Storage

/// `broker webhook set|show|disable` (issue 23 §5).
struct WebhookCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webhook",
        abstract: "The tenant's webhook: its events delivered to your backend, signed.",
        discussion: """
            broker serve posts each event (account.created, account.deleted, identity.linked, identity.unlinked, \
            apple.consent_revoked, apple.account_deleted, apple.email_disabled, apple.email_enabled) to the URL as \
            JSON, signed as Standard Webhooks has it (webhook-id, webhook-timestamp, webhook-signature: v1,<base64 \
            HMAC-SHA256>), at least once and in order per account, retrying with backoff for about a day. \
            URLs must be https:// to a public address; http:// and loopback or private addresses only with \
            BROKER_WEBHOOK_ALLOW_INSECURE=1 (tests, demos). See deliveries with broker events list.
            """,
        subcommands: [Set.self, Show.self, Disable.self])

    struct WebhookJSON: Encodable {
        let url: String
        let events: [String]
        let enabled: Bool
        let created_at: Date
        let updated_at: Date
        var secret: String?
        var deliveries: [String: Int]?

        init(_ webhook: WebhookRepository.Webhook) {
            url = webhook.url
            events = webhook.eventTypes ?? EventType.all
            enabled = webhook.enabled
            created_at = webhook.createdAt
            updated_at = webhook.updatedAt
        }
    }

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create or change the tenant's webhook and enable it; a new one's signing secret is printed once.",
            discussion: """
                Setting a webhook that exists keeps its signing secret unless --rotate-secret is given. A new \
                webhook, or one set again after disable, receives the events committed from then on (earlier ones \
                stay readable through GET /v1/events).
                """)
        @Option(help: "The tenant slug.") var tenant: String
        @Option(help: "The https:// URL deliveries are posted to.") var url: String
        @Option(
            parsing: .upToNextOption,
            help: "Only these event types (space- or comma-separated); default every type.")
        var events: [String] = []
        @Flag(help: "Make a new signing secret (printed once); the old one stops verifying at once.") var rotateSecret = false
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let context = try CLIContext()
                let (actor, tenant, url, events, rotate) = (context.actor, tenant, url, events, rotateSecret)
                let allowInsecure = context.configuration.webhookAllowInsecure
                let secrets = SecretBox(masterKey: try context.masterKey())
                let result = try await context.withDatabase { database in
                    try await WebhookAdmin(database: database, actor: actor).set(
                        tenant: tenant, url: url, events: events, rotateSecret: rotate, secrets: secrets, allowInsecure: allowInsecure)
                }
                var output = WebhookJSON(result.webhook)
                output.secret = result.secret
                if options.json {
                    try Output.json(output)
                } else {
                    print("Webhook of '\(tenant)' \(result.created ? "created" : "updated"): \(output.url)")
                    print("Events: \(result.webhook.eventTypes?.joined(separator: ", ") ?? "every type")")
                    if let secret = result.secret {
                        print("Signing secret (shown this once; verify webhook-signature with it):")
                        print(secret)
                    } else {
                        print("Signing secret unchanged (--rotate-secret makes a new one).")
                    }
                }
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the tenant's webhook and its deliveries by status (never the secret).")
        @Option(help: "The tenant slug.") var tenant: String
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let context = try CLIContext()
                let (actor, tenant) = (context.actor, tenant)
                let status = try await context.withDatabase { database in
                    try await WebhookAdmin(database: database, actor: actor).show(tenant: tenant)
                }
                guard let webhook = status.webhook else {
                    throw BrokerError(
                        code: "webhook_not_found", kind: .notFound, title: "Webhook not found",
                        detail: "Tenant '\(tenant)' has no webhook.", arguments: ["tenant": tenant])
                }
                var output = WebhookJSON(webhook)
                output.deliveries = Dictionary(
                    uniqueKeysWithValues: WebhookRepository.DeliveryStatus.allCases.map { ($0.rawValue, status.deliveries[$0] ?? 0) })
                if options.json {
                    try Output.json(output)
                } else {
                    print("URL:        \(output.url)")
                    print("Enabled:    \(output.enabled ? "yes" : "no")")
                    print("Events:     \(webhook.eventTypes?.joined(separator: ", ") ?? "every type")")
                    print("Updated:    \(Output.date(output.updated_at))")
                    let counts = WebhookRepository.DeliveryStatus.allCases.map { "\($0.rawValue) \(status.deliveries[$0] ?? 0)" }
                    print("Deliveries: \(counts.joined(separator: ", "))")
                }
            }
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop the tenant's webhook; pending deliveries wait until it is set again.")
        @Option(help: "The tenant slug.") var tenant: String
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let context = try CLIContext()
                let (actor, tenant) = (context.actor, tenant)
                try await context.withDatabase { database in
                    try await WebhookAdmin(database: database, actor: actor).disable(tenant: tenant)
                }
                if options.json { try Output.json(["disabled": true]) } else { print("Webhook of '\(tenant)' disabled.") }
            }
        }
    }
}

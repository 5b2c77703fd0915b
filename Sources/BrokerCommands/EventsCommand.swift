import ArgumentParser
import BrokerApplication
import BrokerCore
import Foundation
import Storage

/// `broker events list|redeliver` (issue 23 §5): the tenant's webhook deliveries.
struct EventsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events",
        abstract: "Webhook deliveries of the tenant's events: list them, send them again.",
        subcommands: [List.self, Redeliver.self])

    struct DeliveryJSON: Encodable {
        let event_id: String
        let type: String
        let account_id: String?
        let status: String
        let attempts: Int
        let next_attempt_at: Date?
        let last_status: Int?
        let last_error: String?
        let created_at: Date
        let delivered_at: Date?

        init(_ delivery: WebhookRepository.Delivery) {
            event_id = "evt_\(delivery.eventID)"
            type = delivery.eventType
            account_id = delivery.accountID?.lowercasedString
            status = delivery.status.rawValue
            attempts = delivery.attempts
            next_attempt_at = delivery.status == .pending ? delivery.nextAttemptAt : nil
            last_status = delivery.lastStatus
            last_error = delivery.lastError
            created_at = delivery.createdAt
            delivered_at = delivery.deliveredAt
        }

        func encode(to encoder: any Encoder) throws {
            enum Keys: String, CodingKey {
                case event_id, type, account_id, status, attempts, next_attempt_at, last_status, last_error, created_at, delivered_at
            }
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(event_id, forKey: .event_id)
            try container.encode(type, forKey: .type)
            try container.encode(account_id, forKey: .account_id)
            try container.encode(status, forKey: .status)
            try container.encode(attempts, forKey: .attempts)
            try container.encode(next_attempt_at, forKey: .next_attempt_at)
            try container.encode(last_status, forKey: .last_status)
            try container.encode(last_error, forKey: .last_error)
            try container.encode(created_at, forKey: .created_at)
            try container.encode(delivered_at, forKey: .delivered_at)
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the tenant's webhook deliveries, newest first.")
        @Option(help: "The tenant slug.") var tenant: String
        @Option(help: "Only this status: pending, delivered or failed.") var status: String?
        @Option(help: "At most this many (1-10000).") var limit = 100
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let filter: WebhookRepository.DeliveryStatus?
                if let status {
                    guard let parsed = WebhookRepository.DeliveryStatus(rawValue: status) else {
                        throw BrokerError.invalidArgument(
                            "'\(status.prefix(40))' is not a delivery status.", hint: "Use --status pending, delivered or failed.")
                    }
                    filter = parsed
                } else {
                    filter = nil
                }
                guard (1...10_000).contains(limit) else { throw BrokerError.invalidArgument("--limit must be from 1 to 10000.") }
                let context = try CLIContext()
                let (actor, tenant, limit) = (context.actor, tenant, limit)
                let deliveries = try await context.withDatabase { database in
                    try await WebhookAdmin(database: database, actor: actor).deliveries(tenant: tenant, status: filter, limit: limit)
                }
                let output = deliveries.map(DeliveryJSON.init)
                if options.json {
                    try Output.json(output)
                } else if output.isEmpty {
                    print("Tenant '\(tenant)' has no\(status.map { " \($0)" } ?? "") webhook deliveries.")
                } else {
                    Output.table(
                        ["EVENT", "TYPE", "STATUS", "ATTEMPTS", "LAST", "NEXT ATTEMPT", "LAST ERROR", "ACCOUNT"],
                        output.map {
                            [
                                $0.event_id, $0.type, $0.status, "\($0.attempts)", $0.last_status.map(String.init) ?? "-",
                                $0.next_attempt_at.map(Output.date) ?? "-", Output.text($0.last_error ?? "-"), $0.account_id ?? "-",
                            ]
                        })
                }
            }
        }
    }

    struct Redeliver: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send deliveries again, due now: the events named, or every failed one of the tenant.")
        @Option(help: "The tenant slug.") var tenant: String
        @Argument(help: "Event ids (evt_N, from list); without any, every failed delivery.") var events: [String] = []
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let slug = tenant
                let ids = try events.map { text -> Int64 in
                    let digits = text.hasPrefix("evt_") ? String(text.dropFirst(4)) : text
                    guard let id = Int64(digits), id > 0 else {
                        throw BrokerError.invalidArgument(
                            "'\(text.prefix(40))' is not an event id.",
                            hint: "Take the EVENT column of: broker events list --tenant \(slug)")
                    }
                    return id
                }
                let context = try CLIContext()
                let (actor, tenant) = (context.actor, tenant)
                let queued = try await context.withDatabase { database in
                    try await WebhookAdmin(database: database, actor: actor).redeliver(tenant: tenant, eventIDs: ids)
                }
                if options.json {
                    try Output.json(["redelivered": queued.map { "evt_\($0)" }])
                } else if queued.isEmpty {
                    print("Tenant '\(tenant)' has no failed webhook deliveries.")
                } else {
                    print(
                        "\(queued.count) deliver\(queued.count == 1 ? "y" : "ies") of '\(tenant)' queued again; broker serve sends them now."
                    )
                }
            }
        }
    }
}

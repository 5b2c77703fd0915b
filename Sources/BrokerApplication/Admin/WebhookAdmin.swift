import BrokerCore
import Foundation
import Storage

/// Operator actions on a tenant's webhook and its deliveries (issue 23 §5; decision 0044).
public struct WebhookAdmin: Sendable {
    package let database: Database
    package let actor: String

    public init(database: Database, actor: String) {
        self.database = database
        self.actor = actor
    }

    public struct Status: Sendable {
        public let webhook: WebhookRepository.Webhook?
        public let deliveries: [WebhookRepository.DeliveryStatus: Int]
    }

    /// Creates or changes the tenant's webhook and enables it. A new webhook, or one asked to
    /// `rotateSecret`, gets a new signing secret, returned here and never again; otherwise
    /// the secret is kept and nil returned. `events` empty: every event type.
    public func set(
        tenant slug: String, url: String, events: [String], rotateSecret: Bool, secrets: SecretBox, allowInsecure: Bool
    ) async throws -> (webhook: WebhookRepository.Webhook, created: Bool, secret: String?) {
        let destination = try WebhookDestination(url, allowInsecure: allowInsecure)
        let types = try Self.eventTypes(events)
        let tenant = try await TenantAdmin.find(slug, in: database)
        // Each delivery looks the host up again and connects to what it checked; with
        // insecure destinations allowed a name need not resolve yet.
        if !allowInsecure { try await destination.checkedAddress(.secure) }
        let existing = try await database.webhooks.find(tenantID: tenant.id)
        let secret = existing == nil || rotateSecret ? WebhookSignature.newSecret() : nil
        let sealed = try secret.map { try secrets.seal(Data($0.utf8), context: WebhookRepository.sealingContext(tenantID: tenant.id)) }
        let (webhook, created) = try await database.webhooks.set(
            tenantID: tenant.id, url: destination.url.absoluteString, eventTypes: types, sealedSecret: sealed, actor: actor)
        return (webhook, created, secret)
    }

    /// The tenant's webhook (nil when none was set) and its deliveries counted by status.
    public func show(tenant slug: String) async throws -> Status {
        let tenant = try await TenantAdmin.find(slug, in: database)
        async let webhook = database.webhooks.find(tenantID: tenant.id)
        async let counts = database.webhooks.counts(tenantID: tenant.id)
        return Status(webhook: try await webhook, deliveries: try await counts)
    }

    /// Stops the tenant's webhook; `webhook_not_found` when it has no enabled one.
    public func disable(tenant slug: String) async throws {
        let tenant = try await TenantAdmin.find(slug, in: database)
        guard try await database.webhooks.disable(tenantID: tenant.id, actor: actor) else {
            throw Self.notFound(slug)
        }
    }

    /// The tenant's deliveries, newest first.
    public func deliveries(tenant slug: String, status: WebhookRepository.DeliveryStatus?, limit: Int) async throws
        -> [WebhookRepository.Delivery]
    {
        let tenant = try await TenantAdmin.find(slug, in: database)
        return try await database.webhooks.deliveries(tenantID: tenant.id, status: status, limit: limit)
    }

    /// Sends the given events' deliveries again (or every failed one); returns the event ids
    /// queued. An id with no delivery is `delivery_not_found`.
    public func redeliver(tenant slug: String, eventIDs: [Int64]) async throws -> [Int64] {
        let tenant = try await TenantAdmin.find(slug, in: database)
        let queued = try await database.webhooks.redeliver(tenantID: tenant.id, eventIDs: eventIDs, actor: actor)
        if let missing = eventIDs.first(where: { !queued.contains($0) }) {
            throw BrokerError(
                code: "delivery_not_found", kind: .notFound, title: "Delivery not found",
                detail:
                    "Tenant '\(slug)' has no webhook delivery of event evt_\(missing)\(queued.isEmpty ? "" : " (the others were queued)").",
                arguments: ["tenant": slug])
        }
        return queued
    }

    /// The event types asked for, checked; nil (every type) when none is named. Each may be a
    /// comma-separated list.
    static func eventTypes(_ events: [String]) throws(BrokerError) -> [String]? {
        let names = events.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !names.isEmpty else { return nil }
        if let unknown = names.first(where: { !EventType.all.contains($0) }) {
            throw .invalidArgument(
                "'\(unknown.prefix(60))' is not an event type.", hint: "Name some of: \(EventType.all.joined(separator: ", ")).")
        }
        var seen = Set<String>()
        return names.filter { seen.insert($0).inserted }
    }

    static func notFound(_ slug: String) -> BrokerError {
        BrokerError(
            code: "webhook_not_found", kind: .notFound, title: "Webhook not found",
            detail: "Tenant '\(slug)' has no enabled webhook.", arguments: ["tenant": slug])
    }
}

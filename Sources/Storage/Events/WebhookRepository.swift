import BrokerCore
import Foundation
import Logging
import PostgresNIO

extension Database {
    public var webhooks: WebhookRepository { WebhookRepository(client: client, logger: logger) }
}

/// Each tenant's webhook and its deliveries (issue 23 §5; decision 0044). The dispatcher turns
/// the events outbox, in commit order, into one delivery per event the webhook takes; workers
/// of every instance send due deliveries, each account's in order, taken with
/// `FOR UPDATE SKIP LOCKED` and a lease so that no lock is held while the backend answers.
public struct WebhookRepository: Sendable {
    let client: PostgresClient
    let logger: Logger

    public struct Webhook: Sendable, Equatable {
        public let tenantID: UUID
        public let url: String
        /// nil: every event type.
        public let eventTypes: [String]?
        public let enabled: Bool
        public let createdAt: Date
        public let updatedAt: Date
    }

    public enum DeliveryStatus: String, Sendable, CaseIterable {
        case pending, delivered, failed
    }

    /// A delivery as operators see it.
    public struct Delivery: Sendable, Equatable {
        public let eventID: Int64
        public let eventType: String
        public let accountID: UUID?
        public let status: DeliveryStatus
        public let attempts: Int
        public let nextAttemptAt: Date
        public let lastStatus: Int?
        public let lastError: String?
        public let createdAt: Date
        public let deliveredAt: Date?
    }

    /// A due delivery taken by a worker: where to, the sealed secret, and the event.
    public struct Due: Sendable {
        public let eventID: Int64
        public let tenantID: UUID
        public let attempts: Int
        public let url: String
        public let sealedSecret: Data
        public let event: EventRepository.Event
    }

    /// What sending came to.
    public enum Result: Sendable, Equatable {
        /// The backend answered 2xx.
        case delivered(status: Int)
        /// Try again at `retryAt`, or give up (`failed`) when `retryAt` is nil. `status` is the
        /// backend's answer when it gave one.
        case failed(status: Int?, error: String, retryAt: Date?)
        /// The broker stopped mid-send (issue 39 D11): whether the backend took it is unknown;
        /// the lease is given back (due now, no attempt counted) and it is sent again with the
        /// same `webhook-id`.
        case interrupted
    }

    /// The context the signing secret is sealed under.
    public static func sealingContext(tenantID: UUID) -> String { "webhook:\(tenantID.lowercasedString)" }

    /// How long a taken delivery is leased to its worker (a send is bounded well within it).
    public static let lease: TimeInterval = 60

    /// Creates or changes the tenant's webhook and enables it. `sealedSecret` replaces the
    /// signing secret (required for a new webhook); nil keeps it. A new webhook, or one that was
    /// disabled, takes the events committed from now on. Returns the webhook and whether it is new.
    public func set(tenantID: UUID, url: String, eventTypes: [String]?, sealedSecret: Data?, actor: String) async throws -> (Webhook, Bool)
    {
        try await client.transaction(logger: logger) { connection in
            let rows: [PostgresRow]
            if let sealedSecret {
                rows = try await connection.query(
                    """
                    INSERT INTO webhooks (tenant_id, url, event_types, secret_sealed, cursor_tx)
                    VALUES (\(tenantID), \(url), \(eventTypes), \(sealedSecret), pg_snapshot_xmin(pg_current_snapshot()))
                    ON CONFLICT (tenant_id) DO UPDATE SET url = EXCLUDED.url, event_types = EXCLUDED.event_types,
                        secret_sealed = EXCLUDED.secret_sealed, \(unescaped: Self.enabling(startingAt: "EXCLUDED.cursor_tx"))
                    RETURNING \(unescaped: Self.columns), (xmax = 0)
                    """, logger: logger
                ).collect()
            } else {
                rows = try await connection.query(
                    """
                    UPDATE webhooks SET url = \(url), event_types = \(eventTypes),
                        \(unescaped: Self.enabling(startingAt: "pg_snapshot_xmin(pg_current_snapshot())"))
                    WHERE tenant_id = \(tenantID)
                    RETURNING \(unescaped: Self.columns), false
                    """, logger: logger
                ).collect()
            }
            guard let row = rows.first else {
                throw BrokerError(
                    code: "webhook_not_found", kind: .notFound, title: "Webhook not found",
                    detail: "The tenant has no webhook whose secret could be kept.")
            }
            var reader = RowReader(row)
            let webhook = try Self.decode(&reader)
            let created = try reader.next(Bool.self)
            var details: [String: AuditDetail] = ["url": .string(Self.auditedURL(url)), "created": .bool(created)]
            details["events"] = .string(eventTypes?.joined(separator: ",") ?? "*")
            details["secret_rotated"] = .bool(sealedSecret != nil && !created)
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: actor, action: "webhook.set", target: nil, details: details, on: connection, logger: logger)
            return (webhook, created)
        }
    }

    /// The tenant's webhook; nil when it has none.
    public func find(tenantID: UUID) async throws -> Webhook? {
        let rows = try await client.rows("SELECT \(unescaped: Self.columns) FROM webhooks WHERE tenant_id = \(tenantID)", logger: logger)
        guard let row = rows.first else { return nil }
        var reader = RowReader(row)
        return try Self.decode(&reader)
    }

    /// The tenant's deliveries counted by status.
    public func counts(tenantID: UUID) async throws -> [DeliveryStatus: Int] {
        let rows = try await client.rows(
            "SELECT status, count(*) FROM webhook_deliveries WHERE tenant_id = \(tenantID) GROUP BY status", logger: logger)
        var counts: [DeliveryStatus: Int] = [:]
        for row in rows {
            let (status, count) = try row.decode((String, Int).self)
            if let status = DeliveryStatus(rawValue: status) { counts[status] = count }
        }
        return counts
    }

    /// Stops the tenant's webhook: nothing more is dispatched or sent (pending deliveries wait
    /// for it to be set again). False when the tenant has no enabled webhook.
    public func disable(tenantID: UUID, actor: String) async throws -> Bool {
        try await client.transaction(logger: logger) { connection in
            let rows = try await connection.query(
                "UPDATE webhooks SET enabled = false, updated_at = now() WHERE tenant_id = \(tenantID) AND enabled RETURNING url",
                logger: logger
            ).collect()
            guard let url = try rows.first?.decode(String.self) else { return false }
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: actor, action: "webhook.disabled", target: nil, details: ["url": .string(Self.auditedURL(url))],
                on: connection, logger: logger)
            return true
        }
    }

    /// Writes one delivery for each event, committed after its webhook's cursor, that the
    /// webhook takes, and moves the cursor past the events read (at most `limit` a tenant), in
    /// one statement: an event gets one delivery however many instances dispatch. A delivery
    /// behind one of its account's that waits for a retry is due no sooner than that retry.
    /// Returns how many events were read.
    @discardableResult
    public func dispatch(limit: Int = 500) async throws -> Int {
        let rows = try await WorkerCall.bounded { [client, logger] in
            try await client.rows(
                """
                WITH hooks AS (
                    SELECT tenant_id, event_types, cursor_tx, cursor_id FROM webhooks WHERE enabled FOR UPDATE SKIP LOCKED
                ), batch AS (
                    SELECT h.tenant_id, h.event_types, e.id, e.tx, e.account_id, e.event_type FROM hooks h
                    CROSS JOIN LATERAL (
                        SELECT o.id, o.tx, o.account_id, o.event_type FROM events_outbox o
                        WHERE o.tenant_id = h.tenant_id AND (o.tx, o.id) > (h.cursor_tx, h.cursor_id)
                            AND o.tx < pg_snapshot_xmin(pg_current_snapshot())
                        ORDER BY o.tx, o.id LIMIT \(limit)) e
                ), written AS (
                    INSERT INTO webhook_deliveries (event_id, tenant_id, account_id, event_tx, next_attempt_at)
                    SELECT b.id, b.tenant_id, b.account_id, b.tx, GREATEST(now(), (
                        SELECT max(q.next_attempt_at) FROM webhook_deliveries q
                        WHERE q.tenant_id = b.tenant_id AND q.account_id = b.account_id AND q.status = 'pending'))
                    FROM batch b WHERE b.event_types IS NULL OR b.event_type = ANY (b.event_types)
                    ON CONFLICT (event_id) DO NOTHING
                ), last AS (
                    SELECT DISTINCT ON (tenant_id) tenant_id, tx, id FROM batch ORDER BY tenant_id, tx DESC, id DESC
                ), moved AS (
                    UPDATE webhooks w SET cursor_tx = last.tx, cursor_id = last.id FROM last WHERE w.tenant_id = last.tenant_id
                )
                SELECT count(*) FROM batch
                """, logger: logger)
        }
        return try rows.first?.decode(Int.self) ?? 0
    }

    /// Takes the most overdue pending delivery (of any tenant whose webhook is enabled) due at
    /// `now` that no earlier pending delivery of its account holds back, by moving its due time
    /// one lease ahead; calls `send` with it and records the result. False when none was due.
    /// `excluding`: tenants whose deliveries the worker is sending now, so that a slow or dead
    /// receiver holds back its own tenant and not the others (issue 39 E12).
    ///
    /// A take whose answer was lost (the database went away mid-statement) may have committed:
    /// it throws ``TakeInterrupted`` with the lease it asked for, which ``releaseLeases(_:)``
    /// gives back once the database answers, instead of the delivery waiting out its lease.
    public func processNext(now: Date, excluding busy: [UUID] = [], _ send: @Sendable (Due) async -> Result) async throws -> Bool {
        let leaseUntil = now.addingTimeInterval(Self.lease)
        let rows: [PostgresRow]
        do {
            rows = try await take(now: now, leaseUntil: leaseUntil, excluding: busy)
        } catch let error where error.postgresError?.sqlState == nil {
            throw TakeInterrupted(leaseUntil: leaseUntil, underlying: error)
        }
        return try await process(rows, send)
    }

    /// A take that may or may not have committed; its lease ends at `leaseUntil`.
    public struct TakeInterrupted: Error, Sendable {
        public let leaseUntil: Date
        public let underlying: any Error
    }

    /// Gives back the leases of takes whose answer was lost (``TakeInterrupted``): a pending
    /// delivery leased until exactly one of these instants is due again now. Returns how many.
    @discardableResult
    public func releaseLeases(_ leases: [Date]) async throws -> Int {
        guard !leases.isEmpty else { return 0 }
        let rows = try await WorkerCall.bounded { [client, logger] in
            try await client.rows(
                """
                WITH released AS (
                    UPDATE webhook_deliveries SET next_attempt_at = now(), updated_at = now()
                    WHERE status = 'pending' AND next_attempt_at = ANY (\(leases)::timestamptz[])
                    RETURNING 1
                )
                SELECT count(*)::int8 FROM released
                """, logger: logger)
        }
        return try rows.first?.decode(Int.self) ?? 0
    }

    private func take(now: Date, leaseUntil: Date, excluding busy: [UUID]) async throws -> [PostgresRow] {
        let (plan, statement) = Self.take(now: now, leaseUntil: leaseUntil, excluding: busy)
        return try await WorkerCall.bounded { [client, logger] in
            try await client.transaction(logger: logger) { connection in
                _ = try await connection.query(plan, logger: logger).collect()
                return try await connection.query(statement, logger: logger).collect()
            }
        }
    }

    /// The take, in its transaction after `plan`. It must walk the due deliveries in
    /// `next_attempt_at` order and stop at the first it may send. Left to itself the planner
    /// reads every due delivery, checks each, and sorts them all to keep one: always with the
    /// generic plan the broker's connections use (decision 0075), and with a plan made for the
    /// values too while the table has no statistics. That was 128 ms a take with 10,000
    /// pending, so that a backlog drained at 44 deliveries a second while it took most of
    /// PostgreSQL's CPU (the soak of issue 43; decision 0089). With sorts off for this
    /// transaction, and a plan made for its values, the only plan left reads the due index
    /// from its start.
    static func take(now: Date, leaseUntil: Date, excluding busy: [UUID]) -> (plan: PostgresQuery, statement: PostgresQuery) {
        (
            "SELECT set_config('plan_cache_mode', 'force_custom_plan', true), set_config('enable_sort', 'off', true)",
            """
            UPDATE webhook_deliveries d SET next_attempt_at = \(leaseUntil), updated_at = now()
            FROM webhooks w, events_outbox e
            WHERE d.event_id = (
                SELECT p.event_id FROM webhook_deliveries p
                WHERE p.status = 'pending' AND p.next_attempt_at <= \(now)
                    AND p.tenant_id <> ALL (\(busy)::uuid[])
                    AND EXISTS (SELECT 1 FROM webhooks h WHERE h.tenant_id = p.tenant_id AND h.enabled)
                    AND NOT EXISTS (
                        SELECT 1 FROM webhook_deliveries q
                        WHERE q.tenant_id = p.tenant_id AND q.account_id = p.account_id AND q.status = 'pending'
                            AND (q.event_tx, q.event_id) < (p.event_tx, p.event_id))
                ORDER BY p.next_attempt_at LIMIT 1 FOR UPDATE OF p SKIP LOCKED)
              AND w.tenant_id = d.tenant_id AND e.id = d.event_id AND e.tenant_id = d.tenant_id
            RETURNING d.event_id, d.tenant_id, d.attempts, w.url, w.secret_sealed,
                e.tx::text, e.event_type, e.account_id, e.created_at, e.payload::text
            """
        )
    }

    private func process(_ rows: [PostgresRow], _ send: @Sendable (Due) async -> Result) async throws -> Bool {
        guard let row = rows.first else { return false }
        var reader = RowReader(row)
        let eventID = try reader.next(Int64.self)
        let tenantID = try reader.next(UUID.self)
        let attempts = try reader.next(Int.self)
        let url = try reader.next(String.self)
        let sealed = try reader.next(Data.self)
        let tx = try reader.next(String.self)
        let event = EventRepository.Event(
            id: eventID, cursor: EventRepository.Cursor(transaction: UInt64(tx) ?? 0, id: eventID), type: try reader.next(String.self),
            accountID: try reader.next(UUID?.self), occurredAt: try reader.next(Date.self), data: try reader.next(String.self))
        let due = Due(eventID: eventID, tenantID: tenantID, attempts: attempts, url: url, sealedSecret: sealed, event: event)
        let result = await send(due)
        try await OutcomeWrite.retrying(lease: Self.lease, what: "webhook delivery of event \(eventID)", logger: logger) {
            try await record(result, of: due)
        }
        return true
    }

    /// Writes what sending came to, to a delivery still pending. A failure that will be retried
    /// also holds back the later pending deliveries of its account until its retry, so that
    /// they are not taken (and skipped) over and over meanwhile.
    func record(_ result: Result, of due: Due) async throws {
        let (tenant, eventID) = (due.tenantID, due.eventID)
        try await client.transaction(logger: logger) { connection in
            switch result {
            case .interrupted:
                try await connection.query(
                    """
                    UPDATE webhook_deliveries SET next_attempt_at = now(), updated_at = now()
                    WHERE event_id = \(eventID) AND tenant_id = \(tenant) AND status = 'pending'
                    """, logger: logger)
            case .delivered(let status):
                try await connection.query(
                    """
                    UPDATE webhook_deliveries SET status = 'delivered', attempts = attempts + 1, last_status = \(status),
                        last_error = NULL, delivered_at = now(), updated_at = now()
                    WHERE event_id = \(eventID) AND tenant_id = \(tenant) AND status = 'pending'
                    """, logger: logger)
            case .failed(let status, let error, let retryAt?):
                try await connection.query(
                    """
                    UPDATE webhook_deliveries SET attempts = attempts + 1, last_status = \(status), last_error = \(error),
                        next_attempt_at = \(retryAt), updated_at = now()
                    WHERE event_id = \(eventID) AND tenant_id = \(tenant) AND status = 'pending'
                    """, logger: logger)
                if let accountID = due.event.accountID {
                    try await connection.query(
                        """
                        UPDATE webhook_deliveries SET next_attempt_at = \(retryAt)
                        WHERE tenant_id = \(tenant) AND account_id = \(accountID) AND status = 'pending'
                            AND (event_tx, event_id) > (\(String(due.event.cursor.transaction))::xid8, \(eventID))
                            AND next_attempt_at < \(retryAt)
                        """, logger: logger)
                }
            case .failed(let status, let error, nil):
                try await connection.query(
                    """
                    UPDATE webhook_deliveries SET status = 'failed', attempts = attempts + 1, last_status = \(status),
                        last_error = \(error), updated_at = now()
                    WHERE event_id = \(eventID) AND tenant_id = \(tenant) AND status = 'pending'
                    """, logger: logger)
                try await AuditLogRepository.append(
                    tenantID: tenant, actor: "broker", action: "webhook.delivery_failed", target: "evt_\(eventID)",
                    details: ["event_type": .string(due.event.type), "error": .string(error)], on: connection, logger: logger)
            }
        }
    }

    /// The tenant's deliveries, newest first, optionally of one status.
    public func deliveries(tenantID: UUID, status: DeliveryStatus? = nil, limit: Int = 100) async throws -> [Delivery] {
        let rows = try await client.rows(
            """
            SELECT d.event_id, e.event_type, d.account_id, d.status, d.attempts, d.next_attempt_at, d.last_status, d.last_error,
                d.created_at, d.delivered_at
            FROM webhook_deliveries d JOIN events_outbox e ON e.id = d.event_id AND e.tenant_id = d.tenant_id
            WHERE d.tenant_id = \(tenantID) AND (\(status?.rawValue)::text IS NULL OR d.status = \(status?.rawValue))
            ORDER BY d.event_id DESC LIMIT \(limit)
            """, logger: logger)
        return try rows.map { row in
            var reader = RowReader(row)
            return Delivery(
                eventID: try reader.next(Int64.self), eventType: try reader.next(String.self), accountID: try reader.next(UUID?.self),
                status: DeliveryStatus(rawValue: try reader.next(String.self)) ?? .pending, attempts: try reader.next(Int.self),
                nextAttemptAt: try reader.next(Date.self), lastStatus: try reader.next(Int?.self), lastError: try reader.next(String?.self),
                createdAt: try reader.next(Date.self), deliveredAt: try reader.next(Date?.self))
        }
    }

    /// Sends deliveries again, due now with their attempts counted from zero: the given events'
    /// (whatever their status), or every failed one of the tenant when `eventIDs` is empty.
    /// Returns the event ids queued.
    public func redeliver(tenantID: UUID, eventIDs: [Int64], actor: String) async throws -> [Int64] {
        try await client.transaction(logger: logger) { connection in
            let ids = try await connection.query(
                """
                UPDATE webhook_deliveries SET status = 'pending', attempts = 0, next_attempt_at = now(), last_status = NULL, last_error = NULL,
                    updated_at = now()
                WHERE tenant_id = \(tenantID)
                    AND (cardinality(\(eventIDs)::bigint[]) = 0 AND status = 'failed' OR event_id = ANY (\(eventIDs)::bigint[]))
                RETURNING event_id
                """, logger: logger
            ).collect().map { try $0.decode(Int64.self) }
            if !ids.isEmpty {
                try await AuditLogRepository.append(
                    tenantID: tenantID, actor: actor, action: "webhook.redelivered", target: nil,
                    details: ["requeued": .int(ids.count)], on: connection, logger: logger)
            }
            return ids.sorted()
        }
    }

    /// A URL as the audit log keeps it: scheme, host, port and path, never a query.
    static func auditedURL(_ url: String) -> String {
        guard var components = URLComponents(string: url) else { return "(unparsable)" }
        components.query = nil
        components.fragment = nil
        components.user = nil
        components.password = nil
        return components.string ?? "(unparsable)"
    }

    static let columns = "tenant_id, url, event_types, enabled, created_at, updated_at"

    /// The assignments that enable a webhook: one that was disabled starts at `cursor` (an SQL
    /// expression: the transactions committed from now on).
    static func enabling(startingAt cursor: String) -> String {
        """
        cursor_tx = CASE WHEN webhooks.enabled THEN webhooks.cursor_tx ELSE \(cursor) END,
        cursor_id = CASE WHEN webhooks.enabled THEN webhooks.cursor_id ELSE 0 END, enabled = true, updated_at = now()
        """
    }

    static func decode(_ reader: inout RowReader) throws -> Webhook {
        Webhook(
            tenantID: try reader.next(UUID.self), url: try reader.next(String.self), eventTypes: try reader.next([String]?.self),
            enabled: try reader.next(Bool.self), createdAt: try reader.next(Date.self), updatedAt: try reader.next(Date.self))
    }
}

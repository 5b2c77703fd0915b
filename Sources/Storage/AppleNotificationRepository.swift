import BrokerCore
import Foundation
import Logging
import PostgresNIO

extension Database {
    public var appleNotifications: AppleNotificationRepository {
        AppleNotificationRepository(client: client, logger: logger, emailNotifications: emailNotifications)
    }
}

/// Apple's server-to-server notifications (issue 23 §1; decision 0041): each applied to one
/// tenant in one transaction with its receipt (deduplicated by `jti`), its audit row and its
/// events, so a second delivery changes nothing and a failed one leaves nothing half-done.
public struct AppleNotificationRepository: Sendable {
    let client: PostgresClient
    let logger: Logger
    /// Email notifications that arrive together go in one statement (decision 0046).
    var emailNotifications: EmailNotificationBatch? = nil

    /// A tenant and team a primary App ID is registered for.
    public struct Route: Sendable, Equatable {
        public let tenantID: UUID
        public let teamID: String
    }

    /// One event of a verified notification.
    public struct Event: Sendable, Equatable {
        /// `jti`: the receipt's key.
        public let id: String
        /// `consent-revoked`, `account-delete`, `email-disabled`, `email-enabled`, or anything
        /// Apple adds (recorded and ignored).
        public let type: String
        public let subject: String?
        public let eventTime: Date?

        public init(id: String, type: String, subject: String?, eventTime: Date?) {
            self.id = id
            self.type = type
            self.subject = subject
            self.eventTime = eventTime
        }
    }

    public enum Outcome: String, Sendable, Equatable {
        /// The event changed what it names.
        case applied
        /// A second delivery of a `jti`: nothing changed.
        case duplicate
        /// No identity of the tenant has that `sub` under that team (recorded).
        case unknownSubject = "unknown_subject"
        /// An event type the broker does not act on (recorded).
        case ignored
    }

    /// The `revoke_reason` of sessions a consent revocation ended, and the `disabled_reason` of an
    /// account it left without identities.
    public static let consentRevokedReason = "consent_revoked"
    /// The `deleted_reason` of an account Apple's `account-delete` left without identities.
    public static let appleAccountDeleteReason = "apple_account_delete"

    /// The tenants and teams that registered `primaryAppID` as a group's primary App ID. The
    /// one lookup that is not filtered by tenant: a notification names no tenant, its audience
    /// routes it (as a web callback's state does).
    public func routes(primaryAppID: String) async throws -> [Route] {
        try await TenantScope.acrossTenants(because: "a notification's App ID names its tenant") {
            let rows = try await client.rows(
                """
                SELECT g.tenant_id, t.team_id FROM apple_app_groups g
                JOIN apple_teams t ON t.id = g.team_ref AND t.tenant_id = g.tenant_id
                WHERE g.primary_app_id = \(primaryAppID)
                """, logger: logger)
            return try rows.map { row in
                let (tenantID, teamID) = try row.decode((UUID, String).self)
                return Route(tenantID: tenantID, teamID: teamID)
            }
        }
    }

    /// Applies `event` to the tenant's identity `(apple, team, sub)`.
    public func apply(_ event: Event, to route: Route) async throws -> Outcome {
        try await TenantScope.tenant(route.tenantID) {
            if let subject = event.subject, event.type == "email-disabled" || event.type == "email-enabled" {
                // The notifications Apple sends most: in one statement with no transaction around it
                // (one round trip), together with those that arrive at the same time.
                let element = EmailNotificationBatchStatement.Element(event: event, subject: subject, route: route)
                if let emailNotifications { return try await emailNotifications.run(element) }
                return try await EmailNotificationBatchStatement.write([element], client: client, logger: logger)[0]
            }
            if event.subject != nil, event.type == "consent-revoked" {
                // One prepared statement, no transaction around it (decision 0052).
                return try await client.withScopedStatement(writes: true, logger: logger) { connection in try await applyWithReceipt(event, to: route, on: connection) }
            }
            return try await client.transaction(logger: logger) { connection in
                try await applyWithReceipt(event, to: route, on: connection)
            }
        }
    }

    /// The same on a transaction's connection (a credential check that found a revoked token
    /// applies `consent-revoked` in its own transaction).
    func applyWithReceipt(_ event: Event, to route: Route, on connection: PostgresConnection) async throws -> Outcome {
        if let subject = event.subject, event.type == "consent-revoked" {
            let statement = ConsentRevocationStatement(event: event, subject: subject, route: route)
            var rows: [PostgresRow] = []
            for try await row in try await connection.execute(statement, logger: logger) { rows.append(row) }
            return try ConsentRevocationStatement.outcome(rows)
        }
        let tenantID = route.tenantID
        let receipt = try await connection.query(
            """
            INSERT INTO notification_receipts (tenant_id, jti, event_type, event_time)
            VALUES (\(tenantID), \(event.id), \(String(event.type.prefix(64))), \(event.eventTime))
            ON CONFLICT (tenant_id, jti) DO NOTHING RETURNING jti
            """, logger: logger
        ).collect()
        guard !receipt.isEmpty else { return .duplicate }
        let outcome = try await apply(event, route: route, on: connection)
        try await connection.query(
            "UPDATE notification_receipts SET outcome = \(outcome.rawValue) WHERE tenant_id = \(tenantID) AND jti = \(event.id)",
            logger: logger)
        return outcome
    }

    private func apply(_ event: Event, route: Route, on connection: PostgresConnection) async throws -> Outcome {
        let tenantID = route.tenantID
        let handled = ["consent-revoked", "account-delete", "email-disabled", "email-enabled"]
        guard handled.contains(event.type) else {
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: "apple", action: "apple.notification_ignored", target: nil,
                details: ["type": .string(String(event.type.prefix(64)))], on: connection, logger: logger)
            return .ignored
        }
        guard let subject = event.subject,
            let row = try await connection.query(
                """
                SELECT i.id, i.account_id FROM identities i
                WHERE i.tenant_id = \(tenantID) AND i.provider = 'apple' AND i.provider_scope = \(route.teamID) AND i.subject = \(subject)
                FOR UPDATE
                """, logger: logger
            ).collect().first
        else {
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: "apple", action: "apple.notification_unmatched", target: nil,
                details: ["type": .string(event.type)], on: connection, logger: logger)
            return .unknownSubject
        }
        let (identityID, accountID) = try row.decode((UUID, UUID).self)
        var details: [String: AuditDetail] = [
            "account_id": .string(accountID.lowercasedString), "identity_id": .string(identityID.lowercasedString),
        ]
        if let time = event.eventTime { details["event_time"] = .string(time.iso8601String) }
        let eventName: String
        switch event.type {
        case "email-disabled", "email-enabled":
            let deliverable = event.type == "email-enabled"
            try await connection.query(
                """
                UPDATE identities SET relay_email_deliverable = \(deliverable), updated_at = now()
                WHERE tenant_id = \(tenantID) AND id = \(identityID)
                """, logger: logger)
            eventName = deliverable ? "apple.email_enabled" : "apple.email_disabled"
        case "account-delete":
            let (revoked, remaining) = try await unlink(identityID, of: accountID, route: route, on: connection)
            try await connection.query(
                """
                DELETE FROM consent_revocations
                WHERE tenant_id = \(tenantID) AND provider = 'apple' AND provider_scope = \(route.teamID) AND subject = \(subject)
                """, logger: logger)
            var ended = revoked
            if remaining == 0 {
                ended += try await AccountDeletionRepository.revokeSessions(tenantID: tenantID, accountID: accountID, on: connection, logger: logger)
                try await AccountDeletionRepository.tombstone(
                    tenantID: tenantID, accountID: accountID, reason: Self.appleAccountDeleteReason, on: connection, logger: logger)
                try await AuditLogRepository.append(
                    tenantID: tenantID, actor: "apple", action: "account.deleted", target: accountID.lowercasedString,
                    details: [
                        "account_id": .string(accountID.lowercasedString), "reason": .string(Self.appleAccountDeleteReason),
                        "revoked_sessions": .int(ended), "deleted_identities": .int(1), "apple_revocations_queued": .int(0),
                    ],
                    on: connection, logger: logger)
                try await EventOutbox.append(
                    tenantID: tenantID, accountID: accountID, type: "account.deleted",
                    payload: ["account_id": .string(accountID.lowercasedString), "reason": .string(Self.appleAccountDeleteReason)],
                    on: connection, logger: logger)
            }
            details["revoked_sessions"] = .int(ended)
            details["account_deleted"] = .bool(remaining == 0)
            eventName = "apple.account_deleted"
        default:
            // `consent-revoked` with a subject is its own statement (applyWithReceipt); nothing
            // else reaches here.
            return .ignored
        }
        try await AuditLogRepository.append(
            tenantID: tenantID, actor: "apple", action: eventName, target: identityID.lowercasedString, details: details,
            on: connection, logger: logger)
        var payload = details
        payload.removeValue(forKey: "revoked_sessions")
        try await EventOutbox.append(tenantID: tenantID, accountID: accountID, type: eventName, payload: payload, on: connection, logger: logger)
        if event.type == "account-delete" {
            try await EventOutbox.append(
                tenantID: tenantID, accountID: accountID, type: "identity.unlinked",
                payload: [
                    "account_id": .string(accountID.lowercasedString), "identity_id": .string(identityID.lowercasedString),
                    "provider": .string("apple"), "reason": .string(event.type),
                ],
                on: connection, logger: logger)
        }
        return .applied
    }

    /// Ends the sessions opened through the identity and deletes it (its Apple tokens go with
    /// it). Returns the sessions ended and the identities left.
    private func unlink(_ identityID: UUID, of accountID: UUID, route: Route, on connection: PostgresConnection) async throws
        -> (revoked: Int, remaining: Int)
    {
        let tenantID = route.tenantID
        _ = try await connection.query(
            "SELECT status FROM accounts WHERE tenant_id = \(tenantID) AND id = \(accountID) FOR UPDATE", logger: logger
        ).collect()
        let revoked = try await connection.query(
            """
            UPDATE sessions SET revoked_at = now(), revoke_reason = \(Self.appleAccountDeleteReason)
            WHERE tenant_id = \(tenantID) AND account_id = \(accountID) AND identity_id = \(identityID) AND revoked_at IS NULL
            RETURNING id
            """, logger: logger
        ).collect().count
        try await connection.query("DELETE FROM identities WHERE tenant_id = \(tenantID) AND id = \(identityID)", logger: logger)
        let remaining = try await connection.query(
            "SELECT count(*)::int8 FROM identities WHERE tenant_id = \(tenantID) AND account_id = \(accountID)", logger: logger
        ).collect().first?.decode(Int.self) ?? 0
        return (revoked, remaining)
    }
}

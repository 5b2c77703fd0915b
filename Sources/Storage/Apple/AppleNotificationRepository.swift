import BrokerCore
import Foundation
import Logging
import PostgresNIO

extension Database {
    public var appleNotifications: AppleNotificationRepository {
        AppleNotificationRepository(
            client: client, logger: logger, emailNotifications: emailNotifications, consentRevocations: consentRevocations,
            accountDeletes: accountDeleteNotifications)
    }
}

/// Apple's server-to-server notifications (issue 23 §1; decision 0041): each applied to one
/// tenant at once with its receipt (deduplicated by `jti`), its audit row and its events, so a
/// second delivery changes nothing and a failed one leaves nothing half-done. Each type the
/// broker acts on is one statement for all of its notifications that arrive together
/// (decisions 0046, 0052, 0058); the rest (unknown types, no subject) one transaction each.
public struct AppleNotificationRepository: Sendable {
    let client: PostgresClient
    let logger: Logger
    /// Email notifications that arrive together go in one statement (decision 0046).
    var emailNotifications: EmailNotificationBatch? = nil
    /// So do consent revocations and account deletions (decision 0058).
    var consentRevocations: UnlinkingNotificationBatch? = nil
    var accountDeletes: UnlinkingNotificationBatch? = nil

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
            if let subject = event.subject, event.type == "consent-revoked" || event.type == "account-delete" {
                // One prepared statement, no transaction around it (decision 0052), together with
                // those that arrive at the same time (decision 0058).
                let element = AppleNotificationElement(event: event, subject: subject, route: route)
                if event.type == "account-delete" {
                    if let accountDeletes { return try await accountDeletes.run(element) }
                    return try await AccountDeleteNotificationStatement.write([element], client: client, logger: logger)[0]
                }
                if let consentRevocations { return try await consentRevocations.run(element) }
                return try await ConsentRevocationStatement.write([element], client: client, logger: logger)[0]
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
            // One element: its account is the statement's only one, so it is never deferred.
            let statement = ConsentRevocationStatement(elements: [.init(event: event, subject: subject, route: route)])
            guard case .done(let outcome) = try await statement.run(on: connection, logger: logger).first else {
                throw BatchMismatch()
            }
            return outcome
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

    /// What reaches the transaction path: a type the broker does not act on (recorded and
    /// ignored), or one it acts on that names no subject (recorded as unmatched). Every handled
    /// type with a subject is a statement of its own (decisions 0046, 0052, 0058).
    private func apply(_ event: Event, route: Route, on connection: PostgresConnection) async throws -> Outcome {
        let handled = ["consent-revoked", "account-delete", "email-disabled", "email-enabled"]
        guard handled.contains(event.type) else {
            try await AuditLogRepository.append(
                tenantID: route.tenantID, actor: "apple", action: "apple.notification_ignored", target: nil,
                details: ["type": .string(String(event.type.prefix(64)))], on: connection, logger: logger)
            return .ignored
        }
        try await AuditLogRepository.append(
            tenantID: route.tenantID, actor: "apple", action: "apple.notification_unmatched", target: nil,
            details: ["type": .string(event.type)], on: connection, logger: logger)
        return .unknownSubject
    }
}

import BrokerCore
import Foundation
import Logging
import PostgresNIO

extension Database {
    public var appleTransfers: AppleTransferRepository { AppleTransferRepository(client: client, logger: logger) }
}

/// Apple team transfers inside a tenant (issue 23 §4; decision 0045): the identities to export,
/// the `transfer_sub` each was given, and their re-keying onto the target team, by the import
/// or by a sign-in of the transition window. A re-keyed identity keeps its id, account and
/// sessions; Apple's refresh token of the old team is dropped (it was sealed under the old
/// `sub` and is no use to the new team).
public struct AppleTransferRepository: Sendable {
    let client: PostgresClient
    let logger: Logger

    /// An Apple identity to export (its `sub` never leaves the broker but to Apple).
    public struct Candidate: Sendable, Equatable {
        public let identityID: UUID
        public let accountID: UUID
        public let subject: String
        /// Already given a `transfer_sub` for this target team.
        public let exportedTransferSub: String?
    }

    /// What an import line came to.
    public enum Rekeyed: Sendable, Equatable {
        /// The identity now lives under the target team.
        case rekeyed(identityID: UUID)
        /// It already did (an earlier import or a window sign-in).
        case already(identityID: UUID)
        /// No identity of that account was exported with that `transfer_sub`.
        case notFound
        /// Another identity of the tenant already holds the new `sub`.
        case conflict(identityID: UUID)
    }

    /// The id every identity's id follows (the nil UUID): the first page starts after it, so the
    /// statement keeps one form whose `id >` bound the index can take; the broker's connections
    /// plan a statement without its values (decision 0075).
    static let beforeEveryID = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))

    /// The tenant's Apple identities of `sourceTeam`, by id after `after`, at most `limit`.
    public func candidates(tenantID: UUID, sourceTeam: String, targetTeam: String, after: UUID?, limit: Int) async throws -> [Candidate] {
        let rows = try await client.rows(
            """
            SELECT id, account_id, subject, CASE WHEN apple_transfer_team = \(targetTeam) THEN apple_transfer_sub END
            FROM identities
            WHERE tenant_id = \(tenantID) AND provider = 'apple' AND provider_scope = \(sourceTeam)
                AND id > \(after ?? Self.beforeEveryID)
            ORDER BY id LIMIT \(limit)
            """, logger: logger)
        return try rows.map { row in
            let (id, account, subject, transfer) = try row.decode((UUID, UUID, String, String?).self)
            return Candidate(identityID: id, accountID: account, subject: subject, exportedTransferSub: transfer)
        }
    }

    /// How many Apple identities of `sourceTeam` the tenant has.
    public func count(tenantID: UUID, sourceTeam: String) async throws -> Int {
        let rows = try await client.rows(
            "SELECT count(*) FROM identities WHERE tenant_id = \(tenantID) AND provider = 'apple' AND provider_scope = \(sourceTeam)",
            logger: logger)
        return try rows.first?.decode(Int.self) ?? 0
    }

    /// Keeps the `transfer_sub` Apple gave `identityID` for `targetTeam`.
    public func recordExport(tenantID: UUID, identityID: UUID, transferSub: String, targetTeam: String) async throws {
        _ = try await client.rows(
            """
            UPDATE identities SET apple_transfer_sub = \(transferSub), apple_transfer_team = \(targetTeam)
            WHERE tenant_id = \(tenantID) AND id = \(identityID) AND provider = 'apple'
            """, logger: logger)
    }

    /// Whether an identity of `accountID` waits to be re-keyed with `transferSub` onto `targetTeam`.
    public func pending(tenantID: UUID, accountID: UUID, transferSub: String, targetTeam: String) async throws -> Bool {
        let rows = try await client.rows(
            """
            SELECT 1 FROM identities
            WHERE tenant_id = \(tenantID) AND account_id = \(accountID) AND provider = 'apple'
                AND apple_transfer_sub = \(transferSub) AND apple_transfer_team = \(targetTeam)
            """, logger: logger)
        return !rows.isEmpty
    }

    /// Whether the identity `identityID` of `accountID` lives under `team` (re-keyed already).
    public func onTeam(tenantID: UUID, identityID: String, accountID: UUID, team: String) async throws -> Bool {
        guard let id = UUID(uuidString: identityID) else { return false }
        let rows = try await client.rows(
            """
            SELECT 1 FROM identities
            WHERE tenant_id = \(tenantID) AND id = \(id) AND account_id = \(accountID) AND provider = 'apple' AND provider_scope = \(team)
            """, logger: logger)
        return !rows.isEmpty
    }

    /// Audits a finished export.
    public func auditExport(tenantID: UUID, sourceTeam: String, targetTeam: String, exported: Int, failed: Int, actor: String) async throws
    {
        try await client.withScopedStatement(writes: true, logger: logger) { connection in
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: actor, action: "apple.transfer.exported", target: targetTeam,
                details: ["source_team": .string(sourceTeam), "exported": .int(exported), "failed": .int(failed)], on: connection,
                logger: logger)
        }
    }

    /// Re-keys the identity of `accountID` exported with `transferSub` for `targetTeam` onto
    /// that team as `subject` (with the relay email Apple gave, when it gave one).
    public func rekey(
        tenantID: UUID, accountID: UUID, transferSub: String, targetTeam: String, subject: String, email: String?, isPrivateEmail: Bool,
        actor: String
    ) async throws -> Rekeyed {
        try await client.transaction(logger: logger) { connection in
            let holder = try await connection.query(
                """
                SELECT id, account_id FROM identities
                WHERE tenant_id = \(tenantID) AND provider = 'apple' AND provider_scope = \(targetTeam) AND subject = \(subject)
                """, logger: logger
            ).collect().first.map { try $0.decode((UUID, UUID).self) }
            if let (id, account) = holder {
                return account == accountID ? .already(identityID: id) : .conflict(identityID: id)
            }
            let rows = try await connection.query(
                """
                UPDATE identities SET provider_scope = apple_transfer_team, subject = \(subject),
                    email = COALESCE(\(email), email), is_private_email = CASE WHEN \(email)::text IS NULL THEN is_private_email ELSE \(isPrivateEmail) END,
                    \(unescaped: Self.rekeyed)
                WHERE tenant_id = \(tenantID) AND account_id = \(accountID) AND provider = 'apple'
                    AND apple_transfer_sub = \(transferSub) AND apple_transfer_team = \(targetTeam)
                RETURNING id
                """, logger: logger
            ).collect()
            guard let id = try rows.first?.decode(UUID.self) else { return .notFound }
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: actor, action: "apple.transfer.imported", target: id.lowercasedString,
                details: ["account_id": .string(accountID.lowercasedString), "team_id": .string(targetTeam)], on: connection, logger: logger
            )
            return .rekeyed(identityID: id)
        }
    }

    /// A sign-in of the transition window: the token carries the person's `subject` in
    /// `targetTeam` and the `transferSub` an export kept. Re-keys that identity unless the new
    /// `sub` is known already; returns the identity re-keyed, nil when there was nothing to do.
    public func adopt(tenantID: UUID, transferSub: String, targetTeam: String, subject: String) async throws -> UUID? {
        try await client.transaction(logger: logger) { connection in
            let rows = try await connection.query(
                """
                UPDATE identities i SET provider_scope = \(targetTeam), subject = \(subject), \(unescaped: Self.rekeyed)
                WHERE i.tenant_id = \(tenantID) AND i.provider = 'apple' AND i.apple_transfer_sub = \(transferSub)
                    AND i.apple_transfer_team = \(targetTeam)
                    AND NOT EXISTS (
                        SELECT 1 FROM identities k
                        WHERE k.tenant_id = \(tenantID) AND k.provider = 'apple' AND k.provider_scope = \(targetTeam) AND k.subject = \(subject))
                RETURNING i.id, i.account_id
                """, logger: logger
            ).collect()
            guard let (id, account) = try rows.first?.decode((UUID, UUID).self) else { return nil }
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: "apple", action: "apple.transfer.signed_in", target: id.lowercasedString,
                details: ["account_id": .string(account.lowercasedString), "team_id": .string(targetTeam)], on: connection, logger: logger)
            return id
        }
    }

    /// The assignments that finish a re-keying: the old team's token and the export's marks go.
    static let rekeyed = """
        provider_refresh_token_sealed = NULL, provider_token_client_id = NULL, credential_check_due_at = NULL,
        apple_transfer_sub = NULL, apple_transfer_team = NULL, updated_at = now()
        """
}

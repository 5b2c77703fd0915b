import BrokerCore
import Foundation
import Logging
import PostgresNIO

extension Database {
    public var accountDeletions: AccountDeletionRepository { AccountDeletionRepository(client: client, logger: logger) }
}

/// Deleting an account (issue 23 §2, App Store guideline 5.1.1(v)): one transaction that ends
/// its sessions, deletes its identities, clears its personal data, leaves a tombstone (id,
/// `deleted_at`, `deleted_reason`), queues one Apple revocation per Apple refresh token it
/// held, and writes the audit row and the `account.deleted` event.
public struct AccountDeletionRepository: Sendable {
    let client: PostgresClient
    let logger: Logger

    /// The `revoke_reason` of the sessions a deletion ended.
    public static let sessionRevokeReason = "account_deleted"

    /// A provider refresh token an identity of the deleted account held, as stored.
    public struct StoredProviderToken: Sendable {
        public let identityID: UUID
        public let provider: String
        public let providerScope: String
        public let subject: String
        /// The client that obtained the token; nil for a token stored before the broker kept it
        /// and never used by a session since.
        public let clientID: String?
        public let sealed: Data
    }

    /// What a deletion did.
    public enum Outcome: Sendable, Equatable {
        case deleted(revokedSessions: Int, deletedIdentities: Int, appleRevocationsQueued: Int)
        /// No such account, or it is deleted already.
        case accountNotFound
    }

    /// Deletes the account. `queue` is called, inside the transaction, for each Apple refresh
    /// token the account's identities held: it returns the revocation to queue (the token sealed
    /// again under the revocation's id), or nil to queue none. A throw rolls everything back.
    public func delete(
        tenantID: UUID, accountID: UUID, reason: String, actor: String,
        queue: @Sendable (StoredProviderToken) throws -> AppleRevocationRepository.NewRevocation?
    ) async throws -> Outcome {
        try await RaceRetry.run("account deletion", logger: logger) {
            try await client.transaction(logger: logger) { connection in
                // One lock order for every statement that touches an account (issue 39 C10): its
                // identities first, in id order, then the account row, as a sign-in takes them.
                _ = try await connection.query(
                    "SELECT id FROM identities WHERE tenant_id = \(tenantID) AND account_id = \(accountID) ORDER BY id FOR UPDATE",
                    logger: logger
                ).collect()
                let status = try await connection.query(
                    "SELECT status FROM accounts WHERE tenant_id = \(tenantID) AND id = \(accountID) FOR UPDATE", logger: logger
                ).collect().first?.decode(String.self)
                guard let status, status != AccountStatus.deleted.rawValue else { return .accountNotFound }

                let revoked = try await Self.revokeSessions(tenantID: tenantID, accountID: accountID, on: connection, logger: logger)
                let identities = try await connection.query(
                    """
                    DELETE FROM identities WHERE tenant_id = \(tenantID) AND account_id = \(accountID)
                    RETURNING id, provider, provider_scope, subject, provider_token_client_id, provider_refresh_token_sealed
                    """, logger: logger
                ).collect()
                var queued = 0
                for row in identities {
                    let (id, provider, scope, subject, clientID, sealed) = try row.decode(
                        (UUID, String, String, String, String?, Data?).self)
                    guard let sealed else { continue }
                    let stored = StoredProviderToken(
                        identityID: id, provider: provider, providerScope: scope, subject: subject, clientID: clientID, sealed: sealed)
                    guard let revocation = try queue(stored) else { continue }
                    try await AppleRevocationRepository.insert(
                        revocation, tenantID: tenantID, accountID: accountID, on: connection, logger: logger)
                    queued += 1
                }
                try await Self.tombstone(tenantID: tenantID, accountID: accountID, reason: reason, on: connection, logger: logger)
                let account = AuditDetail.string(accountID.lowercasedString)
                try await AuditLogRepository.append(
                    tenantID: tenantID, actor: actor, action: "account.deleted", target: accountID.lowercasedString,
                    details: [
                        "account_id": account, "reason": .string(reason), "revoked_sessions": .int(revoked),
                        "deleted_identities": .int(identities.count), "apple_revocations_queued": .int(queued),
                    ],
                    on: connection, logger: logger)
                try await EventOutbox.append(
                    tenantID: tenantID, accountID: accountID, type: "account.deleted",
                    payload: ["account_id": account, "reason": .string(reason)], on: connection, logger: logger)
                return .deleted(revokedSessions: revoked, deletedIdentities: identities.count, appleRevocationsQueued: queued)
            }
        }
    }

    /// Ends every live session of the account (`account_deleted`); the number ended.
    static func revokeSessions(tenantID: UUID, accountID: UUID, on connection: PostgresConnection, logger: Logger) async throws -> Int {
        try await connection.query(
            AccountStatusRepository.revokeQuery(tenantID: tenantID, accountID: accountID, reason: Self.sessionRevokeReason), logger: logger
        ).collect().count
    }

    /// Turns the account row into a tombstone: status `deleted`, when and why, nothing personal;
    /// and forgets the identities a consent revocation unlinked from it. Apple's `account-delete`
    /// does the same in its own statement (``AccountDeleteNotificationStatement``).
    static func tombstone(tenantID: UUID, accountID: UUID, reason: String, on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query(
            """
            UPDATE accounts SET status = 'deleted', deleted_at = now(), deleted_reason = \(reason), disabled_reason = NULL,
                given_name = NULL, family_name = NULL, display_name = NULL, email = NULL, email_verified = false,
                is_private_email = false, updated_at = now()
            WHERE tenant_id = \(tenantID) AND id = \(accountID)
            """, logger: logger)
        try await connection.query(
            "DELETE FROM consent_revocations WHERE tenant_id = \(tenantID) AND account_id = \(accountID)", logger: logger)
    }

    /// When and why the account was deleted; nil when it is not (or does not exist).
    public func tombstone(tenantID: UUID, accountID: UUID) async throws -> (deletedAt: Date, reason: String?)? {
        let rows = try await client.rows(
            """
            SELECT deleted_at, deleted_reason FROM accounts
            WHERE tenant_id = \(tenantID) AND id = \(accountID) AND status = 'deleted' AND deleted_at IS NOT NULL
            """, logger: logger)
        guard let row = rows.first else { return nil }
        let (deletedAt, reason) = try row.decode((Date, String?).self)
        return (deletedAt, reason)
    }
}

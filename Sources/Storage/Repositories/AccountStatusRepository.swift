import BrokerCore
import Foundation
import Logging
import PostgresNIO

extension Database {
    public var accountStatuses: AccountStatusRepository { AccountStatusRepository(client: client, logger: logger) }
}

/// Disabling and enabling an account (issue 20 §4). A disabled account is refused everywhere:
/// every statement that opens, refreshes or reads a session checks the account's status too,
/// so a session that escaped the disabling's revocation is as dead as the revoked ones.
public struct AccountStatusRepository: Sendable {
    let client: PostgresClient
    let logger: Logger

    public enum Change: Sendable, Equatable {
        /// The status changed; `revokedSessions` sessions were ended with it.
        case changed(revokedSessions: Int)
        /// The account had that status already: nothing was written.
        case unchanged
        /// The tenant has no such account.
        case accountNotFound
        /// The account is deleted: it stays deleted.
        case accountDeleted
    }

    /// Disables the account (`disabled`) or enables it, in one transaction: the
    /// account row locked for update, its status changed, every live session of it revoked
    /// (`account_disabled`) and an `account.disabled` / `account.enabled` audit row written.
    /// Disabling revokes the sessions the account has; enabling revokes any session that was
    /// opened in a race with the disabling and escaped it (none was usable while the account
    /// was disabled, and none may come back with the account), so the account returns with no
    /// session from before. Setting the status it has changes nothing and writes no audit row.
    public func setStatus(tenantID: UUID, accountID: UUID, disabled: Bool, actor: String) async throws -> Change {
        let status: AccountStatus = disabled ? .disabled : .active
        return try await client.transaction(logger: logger) { connection in
            let row = try await connection.query(Self.lockQuery(tenantID: tenantID, accountID: accountID), logger: logger)
                .collect().first?.decode((String, String?).self)
            guard let (current, reason) = row else { return .accountNotFound }
            guard current != AccountStatus.deleted.rawValue else { return .accountDeleted }
            // An account Apple's consent revocation disabled is disabled by the operator too:
            // the next Sign in with Apple no longer enables it.
            guard current != status.rawValue || (disabled && reason != nil) else { return .unchanged }
            _ = try await connection.query(
                Self.updateQuery(tenantID: tenantID, accountID: accountID, status), logger: logger
            ).collect()
            let revoked = try await connection.query(
                Self.revokeQuery(tenantID: tenantID, accountID: accountID), logger: logger
            ).collect().count
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: actor, action: status == .active ? "account.enabled" : "account.disabled",
                target: accountID.lowercasedString,
                details: ["account_id": .string(accountID.lowercasedString), "revoked_sessions": .int(revoked)],
                on: connection, logger: logger)
            return .changed(revokedSessions: revoked)
        }
    }

    /// The account's status; nil when the tenant has no such account.
    public func status(tenantID: UUID, accountID: UUID) async throws -> AccountStatus? {
        let rows = try await client.rows(
            "SELECT status FROM accounts WHERE tenant_id = \(tenantID) AND id = \(accountID)", logger: logger)
        for row in rows { return AccountStatus(rawValue: try row.decode(String.self)) ?? .disabled }
        return nil
    }

    // The statements (their plans are asserted by HotStatementPlanTests, decision 0014).

    static func lockQuery(tenantID: UUID, accountID: UUID) -> PostgresQuery {
        "SELECT status, disabled_reason FROM accounts WHERE tenant_id = \(tenantID) AND id = \(accountID) FOR UPDATE"
    }

    static func updateQuery(tenantID: UUID, accountID: UUID, _ status: AccountStatus) -> PostgresQuery {
        "UPDATE accounts SET status = \(status.rawValue), disabled_reason = NULL, updated_at = now() WHERE tenant_id = \(tenantID) AND id = \(accountID)"
    }

    /// Ends the account's live sessions through the account's sessions index (leading column),
    /// with `reason` (a disabling's unless told: a deletion and Apple's notifications use it too).
    static func revokeQuery(tenantID: UUID, accountID: UUID, reason: String = SessionRepository.accountDisabledReason) -> PostgresQuery {
        """
        UPDATE sessions SET revoked_at = now(), revoke_reason = \(reason)
        WHERE account_id = \(accountID) AND tenant_id = \(tenantID) AND revoked_at IS NULL
        RETURNING id
        """
    }
}

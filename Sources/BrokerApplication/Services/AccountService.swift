import BrokerCore
import Foundation
import Storage

/// An account as `GET /v1/accounts/{id}` and `broker account show` present it: the account and
/// its identities (no secrets).
public struct AccountView: Sendable {
    public let account: Account
    public let identities: [Identity]
}

/// What disabling or enabling did.
public struct AccountStatusChange: Sendable {
    /// The account as it is now.
    public let view: AccountView
    /// False when the account had that status already (nothing was written, no audit row).
    public let changed: Bool
    /// Sessions ended by the change.
    public let revokedSessions: Int
}

/// Reading, disabling and enabling accounts: one service for `GET/POST /v1/accounts/{id}[/disable
/// |/enable]` and `broker account show|disable|enable` (issue 20 §4). A disabled account is
/// refused everywhere: sign-in (403 `account_disabled`), refresh (`invalid_grant`),
/// introspection (`active: false`), linking and unlinking (403 `account_disabled`).
public struct AccountService: Sendable {
    package let database: Database

    public init(database: Database) {
        self.database = database
    }

    /// The account with its identities.
    public func show(tenantID: UUID, accountID rawID: String) async throws -> AccountView {
        guard let id = UUID(uuidString: rawID),
            let (account, identities) = try await database.accounts.find(tenantID: tenantID, accountID: id)
        else { throw Self.notFound(rawID) }
        return AccountView(account: account, identities: identities)
    }

    /// Disables the account and ends its live sessions, in one transaction (audited as
    /// `account.disabled`). Disabling a disabled account changes nothing.
    public func disable(tenantID: UUID, accountID rawID: String, actor: String) async throws -> AccountStatusChange {
        try await setStatus(tenantID: tenantID, accountID: rawID, disabled: true, actor: actor)
    }

    /// Enables the account (audited as `account.enabled`): sign-in works again; sessions ended
    /// by the disabling stay ended. Enabling an active account changes nothing.
    public func enable(tenantID: UUID, accountID rawID: String, actor: String) async throws -> AccountStatusChange {
        try await setStatus(tenantID: tenantID, accountID: rawID, disabled: false, actor: actor)
    }

    private func setStatus(tenantID: UUID, accountID rawID: String, disabled: Bool, actor: String) async throws -> AccountStatusChange {
        guard let id = UUID(uuidString: rawID) else { throw Self.notFound(rawID) }
        let changed: Bool
        let revoked: Int
        switch try await database.accountStatuses.setStatus(tenantID: tenantID, accountID: id, disabled: disabled, actor: actor) {
        case .changed(let count): (changed, revoked) = (true, count)
        case .unchanged: (changed, revoked) = (false, 0)
        case .accountNotFound: throw Self.notFound(rawID)
        case .accountDeleted: throw Self.deleted(id)
        }
        return AccountStatusChange(view: try await show(tenantID: tenantID, accountID: rawID), changed: changed, revokedSessions: revoked)
    }

    package static func notFound(_ id: String) -> BrokerError {
        BrokerError(
            code: "account_not_found", kind: .notFound, title: "Account not found",
            detail: "This tenant has no account '\(id.prefix(60))'.",
            hint: "Use the account id of a sign-in response (account.id) with the tenant that signed the person in.")
    }

    package static func deleted(_ id: UUID) -> BrokerError {
        BrokerError(
            code: "account_deleted", kind: .conflict, title: "Account deleted",
            detail: "Account \(id.lowercasedString) is deleted; it can be neither disabled nor enabled. Nothing changed.")
    }
}

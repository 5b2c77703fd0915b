import BrokerCore
import Foundation
import Storage

/// Reading the security events (decision 0020): `broker audit list`.
public struct AuditAdmin: Sendable {
    package let database: Database

    public init(database: Database) {
        self.database = database
    }

    /// The newest `limit` events, of one tenant (or of all and of none when `tenant` is nil),
    /// optionally of one account and of one action or action family (`session` matches
    /// `session.signed_in`, `session.signed_out`, ...).
    public func events(tenant slug: String?, account: String?, action: String?, limit: Int) async throws
        -> [AuditLogRepository.SecurityEvent]
    {
        guard (1...10_000).contains(limit) else {
            throw BrokerError.invalidArgument("--limit must be between 1 and 10000.")
        }
        var tenantID: UUID?
        if let slug { tenantID = try await TenantAdmin.find(slug, in: database).id }
        var accountID: UUID?
        if let account {
            guard let id = UUID(uuidString: account) else {
                throw BrokerError.invalidArgument(
                    "'\(account.prefix(60))' is not an account id.", hint: "Account ids are UUIDs, as sign-in responses give them.")
            }
            accountID = id
        }
        return try await database.auditLog.securityEvents(
            tenantID: tenantID, accountID: accountID, action: action, limit: limit)
    }
}

import BrokerCore
import Foundation

/// Decides what each record of a batch does (issue 24), from what the database holds for the
/// batch's external ids and identity keys, in record order: a record sees what the records
/// before it in the batch would write. Each record is all-or-nothing.
struct ImportClassifier {
    /// What the database holds for an external id.
    struct ExistingAccount: Sendable {
        let id: UUID
        let status: AccountStatus
    }

    /// An account to create and the identities to write.
    struct Plan: Sendable {
        var outcomes: [ImportOutcome] = []
        var accounts: [(id: UUID, row: ImportRow)] = []
        var identities: [(accountID: UUID, identity: ImportRowIdentity, createdAt: Date?)] = []
    }

    /// By external id, compared byte for byte as the accounts' unique index compares it.
    var accounts: [ExactText: ExistingAccount]
    var owners: [ImportIdentityKey: UUID]

    /// The keys a lookup found in the database.
    struct Found: Sendable {
        var externalIDs: Set<ExactText>
        var identities: Set<ImportIdentityKey>

        func isSubset(of other: Found) -> Bool {
            externalIDs.isSubset(of: other.externalIDs) && identities.isSubset(of: other.identities)
        }
    }

    var found: Found { Found(externalIDs: Set(accounts.keys), identities: Set(owners.keys)) }

    mutating func plan(_ rows: [ImportRow], newAccountID: () -> UUID) -> Plan {
        var plan = Plan()
        for row in rows {
            let existing = accounts[ExactText(row.externalID)]
            if let existing, existing.status == .deleted {
                plan.outcomes.append(.conflict(accountID: existing.id, reason: "the account of external id \(row.externalID) was deleted"))
                continue
            }
            if let taken = row.identities.first(where: { owners[$0.key].map { $0 != existing?.id } ?? false }),
                let owner = owners[taken.key]
            {
                plan.outcomes.append(
                    .conflict(
                        accountID: existing?.id,
                        reason: "identity \(taken.provider) \(taken.subject) is linked to another account (\(owner.lowercasedString))"))
                continue
            }
            let missing = row.identities.filter { owners[$0.key] == nil }
            let accountID: UUID
            if let existing {
                accountID = existing.id
                plan.outcomes.append(
                    missing.isEmpty ? .unchanged(accountID: accountID) : .updated(accountID: accountID, addedIdentities: missing.count))
            } else {
                accountID = newAccountID()
                accounts[ExactText(row.externalID)] = ExistingAccount(id: accountID, status: row.status)
                plan.accounts.append((accountID, row))
                plan.outcomes.append(.created(accountID: accountID))
            }
            for identity in missing {
                owners[identity.key] = accountID
                plan.identities.append((accountID, identity, row.createdAt))
            }
        }
        return plan
    }
}

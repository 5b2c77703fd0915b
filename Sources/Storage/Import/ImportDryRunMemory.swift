import BrokerCore
import Foundation
import Synchronization

/// What a dry run's earlier batches would have written (issue 39 F17): the accounts they would
/// have created, by external id, and the identities they would have added, with their account.
/// A real run's later batch finds those rows in the database; a dry run writes none, so each
/// batch of a dry run decides with this memory too, and reports what the real run would: an
/// identity that two batches claim is created once and a conflict once, as in the real run.
/// It holds one entry per key the dry run would create (an external id, an identity), so a
/// dry run's memory grows with the file, where a real run's does not.
final class ImportDryRunMemory: Sendable {
    private struct Written {
        var accounts: [ExactText: ImportClassifier.ExistingAccount] = [:]
        var owners: [ImportIdentityKey: UUID] = [:]
    }

    private let written = Mutex(Written())

    init() {}

    /// Adds what the earlier batches would have written for the keys of `rows` to what the
    /// database holds (which wins: a key the database holds is the one a real run would meet).
    func recall(_ rows: [ImportRow], into classifier: inout ImportClassifier) {
        written.withLock { written in
            guard !written.accounts.isEmpty || !written.owners.isEmpty else { return }
            for row in rows {
                let externalID = ExactText(row.externalID)
                if classifier.accounts[externalID] == nil, let account = written.accounts[externalID] {
                    classifier.accounts[externalID] = account
                }
                for identity in row.identities where classifier.owners[identity.key] == nil {
                    if let owner = written.owners[identity.key] { classifier.owners[identity.key] = owner }
                }
            }
        }
    }

    /// Remembers what `plan` would write.
    func remember(_ plan: ImportClassifier.Plan) {
        written.withLock { written in
            for (id, row) in plan.accounts {
                written.accounts[ExactText(row.externalID)] = .init(id: id, status: row.status)
            }
            for (accountID, identity, _) in plan.identities { written.owners[identity.key] = accountID }
        }
    }
}

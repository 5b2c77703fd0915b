import BrokerCore
import Foundation
import Logging
import PostgresNIO

/// One callback's claim of a sealed state (decision 0099), as it waits for its batch.
struct SealedClaim: Sendable {
    let state: WebSignInState
    /// The callback's clock.
    let now: Date
    let claimUntil: Date
    /// The posted id token's subject, whose account's status is read with the claim.
    let subject: String?
}

/// Sealed states' claims written in batches (decision 0102): each callback's claim, or nil when
/// its state was not claimed.
typealias SealedClaims = StatementBatcher<SealedClaim, Result<WebSignInRepository.ClaimStateStatement.Row?, any Error>>

extension WebSignInRepository {
    /// A batcher of claims (``BatchElements/batcher(maxRunning:timeout:tenant:because:key:_:)``),
    /// each batch on the pool in use when it starts (``DatabasePool``), in the order of the
    /// states' hashes: two batches that share states lock their rows in one order.
    static func sealedClaims(pool: DatabasePool, logger: Logger, maxRunning: Int, timeout: Duration) -> SealedClaims? {
        BatchElements.batcher(
            maxRunning: maxRunning, timeout: timeout, tenant: \.state.tenantID, because: "a batch carries several tenants' callbacks",
            key: { Array($0.state.stateHash) }
        ) { try await claimSealed($0, client: pool.client, logger: logger) }
    }

    /// One batch: the first claim of each state is posted, at the latest of the callbacks'
    /// clocks; a later one of the same state (a double submit in the same batch) is not
    /// claimed, as when it arrives a moment after the first: its callback then finds the first
    /// in flight (``repeatOf(hash:tenantID:now:codeHash:)``).
    static func claimSealed(_ claims: [SealedClaim], client: PostgresClient, logger: Logger) async throws
        -> [ClaimStateStatement.Row?]
    {
        var posted: [ClaimSealedStatesStatement.Element] = []
        var index: [Int?] = []
        var states = Set<Data>()
        for claim in claims {
            if states.insert(claim.state.stateHash).inserted {
                index.append(posted.count)
                posted.append(.init(state: claim.state, claimUntil: claim.claimUntil, subject: claim.subject))
            } else {
                index.append(nil)
            }
        }
        guard let now = claims.map(\.now).max() else { return [] }
        let statement = ClaimSealedStatesStatement(elements: posted, now: now)
        let claimed = try statement.claims(try await client.rows(statement, logger: logger))
        return index.map { $0.flatMap { claimed[$0] } }
    }
}

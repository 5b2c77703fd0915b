import BrokerCore
import Foundation
import Logging
import PostgresNIO

/// What the lean sign-in batches (quiet, first, known) share: their batcher, the order their
/// elements take locks in, and one identity token posted twice in a batch.
extension AccountRepository {
    /// A batcher of sign-ins (``BatchElements/batcher(maxRunning:timeout:tenant:because:key:_:)``):
    /// each batch in its tenant's scope, in the order of the identities' keys, each element failing
    /// alone.
    static func signInBatcher<Outcome: Sendable>(
        maxRunning: Int, timeout: Duration, _ run: @escaping @Sendable ([SignInRequest]) async throws -> [Outcome]
    ) -> StatementBatcher<SignInRequest, Result<Outcome, any Error>>? {
        BatchElements.batcher(
            maxRunning: maxRunning, timeout: timeout, tenant: \.tenantID, because: "a batch carries several tenants' sign-ins",
            key: lockKey, run)
    }

    /// The key a sign-in takes its locks in the order of: its identity's (sign-ins of one
    /// identity keep their arrival order).
    @Sendable static func lockKey(_ request: SignInRequest) -> [UInt8] {
        Array("\(request.tenantID.lowercasedString)\u{0}\(request.provider)\u{0}\(request.providerScope)\u{0}\(request.subject)".utf8)
    }

    /// The requests to post, the first of each session id, and where each request's outcome is:
    /// its index among them, or `-1 - i` for a later request with the session id of the `i`th.
    static func firstOfEachSession(_ requests: [SignInRequest]) -> (posted: [SignInRequest], index: [Int]) {
        var posted: [SignInRequest] = []
        var postedIndex: [Int] = []
        var firstOfSession: [UUID: Int] = [:]
        for request in requests {
            if let first = firstOfSession[request.session.id] {
                postedIndex.append(-1 - first)
            } else {
                firstOfSession[request.session.id] = posted.count
                postedIndex.append(posted.count)
                posted.append(request)
            }
        }
        return (posted, postedIndex)
    }

    /// One lean batch: the first request of each session id is posted (a later one with the
    /// same id, one identity token posted twice at once, is not), each returned row is read
    /// into its element's outcome, and each request gets its outcome back: `unanswered` for an
    /// element the statement returned no row for, `repeated(first's)` for a later request of
    /// a session id.
    static func postedBatch<Statement: PostgresPreparedStatement, Outcome>(
        _ requests: [SignInRequest], client: PostgresClient, logger: Logger, function: String = #function,
        statement: ([SignInRequest]) -> Statement, unanswered: Outcome,
        read: (inout RowReader, [SignInRequest]) throws -> (n: Int, outcome: Outcome),
        repeated: (Outcome) -> Outcome
    ) async throws -> [Outcome] where Statement.Row == PostgresRow {
        let (posted, postedIndex) = firstOfEachSession(requests)
        var outcomes = [Outcome](repeating: unanswered, count: posted.count)
        for row in try await client.rows(statement(posted), logger: logger, function: function) {
            var reader = RowReader(row)
            let (n, outcome) = try read(&reader, posted)
            guard outcomes.indices.contains(n) else { throw BatchMismatch() }
            outcomes[n] = outcome
        }
        return postedIndex.map { $0 < 0 ? repeated(outcomes[-1 - $0]) : outcomes[$0] }
    }
}

import BrokerCore
import Foundation
import Logging
import PostgresNIO

/// Apple's notifications that unlink an identity (`consent-revoked`, `account-delete`), each
/// type one prepared statement for every notification of it that arrives together (decisions
/// 0052 and 0058).
///
/// Such a statement reads its one snapshot throughout: the identities an account has left are
/// counted as its others, since the deletion is not visible to the statement that makes it. So
/// it takes at most one element per account; another element whose identity belongs to an
/// account already taken is left out (no receipt, nothing written) and goes in the next
/// statement. Its rows say, per element `n`: taken, received (its `jti` new) and applied (its
/// identity found).
protocol UnlinkingNotificationStatement: PostgresPreparedStatement where Row == PostgresRow {
    init(elements: [AppleNotificationElement])
    /// The elements, in arrival order; no two with one receipt key and no two for one identity
    /// (``AppleNotificationElement/rounds(_:)``).
    var elements: [AppleNotificationElement] { get }
}

/// What an unlinking statement did with an element: left it for the next statement (another
/// element of its account went first), or its outcome.
enum UnlinkingResult: Equatable {
    case deferred
    case done(AppleNotificationRepository.Outcome)
}

extension UnlinkingNotificationStatement {
    func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }

    /// `[{"n": 0, "t": tenant, "j": jti, …}, …]`, the statement's `$1`.
    var json: String {
        var writer = JSONWriter(capacity: 256 * elements.count)
        writer.beginArray()
        for (n, element) in elements.enumerated() {
            writer.beginObject()
            element.writeCommonMembers(n, into: &writer)
            writer.endObject()
        }
        writer.endArray()
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    /// The statement's rows, one per element, in the elements' order.
    func results(_ rows: [PostgresRow]) throws -> [UnlinkingResult] {
        guard rows.count == elements.count else { throw BatchMismatch() }
        var results = [UnlinkingResult](repeating: .deferred, count: elements.count)
        for row in rows {
            let (n, taken, received, applied) = try row.decode((Int32, Bool, Bool, Bool).self)
            guard results.indices.contains(Int(n)) else { throw BatchMismatch() }
            results[Int(n)] = !taken ? .deferred : !received ? .done(.duplicate) : .done(applied ? .applied : .unknownSubject)
        }
        return results
    }

    /// Runs on `connection` (a scoped statement's, or a transaction's) and returns each
    /// element's result.
    func run(on connection: PostgresConnection, logger: Logger) async throws -> [UnlinkingResult] {
        var rows: [PostgresRow] = []
        for try await row in try await connection.execute(self, logger: logger) { rows.append(row) }
        return try results(rows)
    }

    /// Each batch runs on the pool in use when it starts (``DatabasePool``); nil when batching
    /// is off (`BROKER_DB_SIGN_IN_BATCHES=0`).
    static func batcher(pool: DatabasePool, logger: Logger, maxRunning: Int, timeout: Duration) -> UnlinkingNotificationBatch? {
        guard maxRunning > 0 else { return nil }
        return UnlinkingNotificationBatch(maxRunning: maxRunning, maxBatch: 64, timeout: timeout) { elements in
            try await TenantScope.shared(by: elements.lazy.map(\.route.tenantID), because: "a batch carries several tenants' notifications") {
                try await writeFailingAlone(elements, client: pool.client, logger: logger)
            }
        }
    }

    /// A batch whose failure one element caused (or a deadlock with another batch) runs again
    /// element by element, so that element fails alone.
    static func writeFailingAlone(_ elements: [AppleNotificationElement], client: PostgresClient, logger: Logger)
        async throws -> [AppleNotificationRepository.Outcome]
    {
        do {
            return try await write(elements, client: client, logger: logger)
        } catch let error where elements.count > 1 && error.postgresError.map(AccountRepository.isAboutOneElement) == true {
            logger.debug(
                "unlinking notification batch failed; writing its elements one by one",
                metadata: ["statement": "\(Self.name)", "sqlstate": "\(error.postgresError?.sqlState ?? "")"])
            var outcomes: [AppleNotificationRepository.Outcome] = []
            for element in elements {
                outcomes.append(try await write([element], client: client, logger: logger)[0])
            }
            return outcomes
        }
    }

    /// Writes `elements` in as few statements as their keys and accounts allow, in arrival
    /// order: each round as one statement, then again what it left for the next (each time the
    /// first element of every account), before the next round.
    static func write(_ elements: [AppleNotificationElement], client: PostgresClient, logger: Logger) async throws
        -> [AppleNotificationRepository.Outcome]
    {
        var outcomes = [AppleNotificationRepository.Outcome](repeating: .duplicate, count: elements.count)
        for round in AppleNotificationElement.rounds(elements) {
            var pending = round
            while !pending.isEmpty {
                let statement = Self(elements: pending.map { elements[$0] })
                let results = try await client.withScopedStatement(writes: true, logger: logger) { connection in
                    try await statement.run(on: connection, logger: logger)
                }
                var next: [Int] = []
                for (index, result) in zip(pending, results) {
                    switch result {
                    case .deferred: next.append(index)
                    case .done(let outcome): outcomes[index] = outcome
                    }
                }
                // Each statement takes the first element of every account it meets.
                guard next.count < pending.count else { throw BatchMismatch() }
                pending = next
            }
        }
        return outcomes
    }
}

typealias UnlinkingNotificationBatch = StatementBatcher<AppleNotificationElement, AppleNotificationRepository.Outcome>

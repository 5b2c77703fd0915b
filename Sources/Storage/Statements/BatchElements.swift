import Foundation
import PostgresNIO

/// What every batch of elements written by one statement (sign-ins, refresh rotations,
/// notifications) shares: the order its elements take their locks in, and a failure one element
/// caused that must fail that element alone.
enum BatchElements {
    /// A batcher (up to 32 elements a batch; nil when batching is off, `maxRunning` 0) whose
    /// batches run in the scope of the one tenant their elements name (across tenants when they
    /// name several), in the order of their elements' keys, each element failing alone.
    static func batcher<Element: Sendable, Outcome: Sendable>(
        maxRunning: Int, timeout: Duration, tenant: @escaping @Sendable (Element) -> UUID, because reason: StaticString,
        key: @escaping @Sendable (Element) -> [UInt8], _ run: @escaping @Sendable ([Element]) async throws -> [Outcome]
    ) -> StatementBatcher<Element, Result<Outcome, any Error>>? {
        guard maxRunning > 0 else { return nil }
        return StatementBatcher(maxRunning: maxRunning, maxBatch: 32, timeout: timeout) { elements in
            try await TenantScope.shared(by: elements.lazy.map(tenant), because: reason) {
                try await inOrder(elements, key: key) { try await failingAlone($0, run) }
            }
        }
    }

    /// Runs a batch with its elements in the order of their keys, and gives the outcomes back in
    /// the batch's order. A statement takes its rows' locks in its elements' order: two batches
    /// holding elements of the same rows in opposite orders deadlocked each other, again on
    /// every retry (issue 39 C10). In one order they wait instead. Elements of one key keep their
    /// arrival order.
    static func inOrder<Element, Outcome>(
        _ elements: [Element], key: (Element) -> [UInt8], _ run: ([Element]) async throws -> [Result<Outcome, any Error>]
    ) async throws -> [Result<Outcome, any Error>] {
        guard elements.count > 1 else { return try await run(elements) }
        let keys = elements.map(key)
        let order = elements.indices.sorted { a, b in
            keys[a] == keys[b] ? a < b : keys[a].lexicographicallyPrecedes(keys[b])
        }
        let results = try await run(order.map { elements[$0] })
        guard results.count == elements.count else { throw BatchMismatch() }
        var restored = results
        for (position, index) in order.enumerated() { restored[index] = results[position] }
        return restored
    }

    /// A batch whose failure one element caused (a value PostgreSQL cannot store, a row deleted
    /// under it) runs again element by element, so that element fails alone.
    static func failingAlone<Element, Outcome>(
        _ elements: [Element], _ run: ([Element]) async throws -> [Outcome]
    ) async throws -> [Result<Outcome, any Error>] {
        do {
            return try await run(elements).map { .success($0) }
        } catch let error where elements.count > 1 && error.postgresError.map(isAboutOneElement) == true {
            var results: [Result<Outcome, any Error>] = []
            for element in elements {
                do { results.append(.success(try await run([element])[0])) } catch { results.append(.failure(error)) }
            }
            return results
        }
    }

    /// Data exceptions (class 22), integrity violations (23) and transaction rollbacks (40):
    /// failures one element can cause. Not timeouts, connection failures or shutdowns, which
    /// would only repeat for each element.
    static func isAboutOneElement(_ error: PSQLError) -> Bool {
        guard let state = error.sqlState else { return false }
        return state.hasPrefix("22") || state.hasPrefix("23") || state.hasPrefix("40")
    }
}

import Foundation
import Logging
import PostgresNIO
import Storage
import Testing

/// Runs `read` while a lock on `table` holds it in the database, runs `meanwhile` once it waits
/// there, then lets it finish: whatever `meanwhile` does happens while the read is under way,
/// without a sleep to place it (the race a cache meets when a change notice overtakes a load).
func whileReadWaitsOnTable<T: Sendable>(
    _ table: String, in app: TestApp, read: @escaping @Sendable () async throws -> T, meanwhile: () async throws -> Void
) async throws -> T {
    let logger = Logger(label: "table-lock")
    let locker = try await PostgresConnection.connect(
        configuration: try DatabaseConfiguration(url: app.databaseURL).connectionConfiguration(), id: 1, logger: logger)
    do {
        try await locker.query("BEGIN", logger: logger)
        try await locker.query("LOCK TABLE \(unescaped: table) IN ACCESS EXCLUSIVE MODE", logger: logger)
        let reading = Task { try await read() }
        let waiting = try await eventually(timeout: .seconds(10)) {
            let rows = try await locker.query(
                """
                SELECT count(*)::int FROM pg_locks WHERE NOT granted AND relation = \(table)::regclass
                AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                """, logger: logger
            ).collect()
            return try (rows.first?.decode(Int.self) ?? 0) > 0
        }
        try #require(waiting, "the read waits on the lock of \(table)")
        try await meanwhile()
        try await locker.query("COMMIT", logger: logger)
        let value = try await reading.value
        try await locker.close()
        return value
    } catch {
        try? await locker.close()
        throw error
    }
}

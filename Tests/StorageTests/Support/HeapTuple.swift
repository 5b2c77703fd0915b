import Foundation
import PostgresNIO

@testable import Storage

/// What `pageinspect` shows of a row's stored version, for the tests that an update stays in
/// place (decisions 0093 and 0095). The database needs `CREATE EXTENSION pageinspect`.
enum HeapTuple {
    /// Whether the row of `table` whose `column` is `value` (one row) is a heap-only tuple:
    /// written in place by an update, with no new entry in any index of the table. `table` and
    /// `column` are the test's own constants.
    static func isHeapOnly(_ table: String, _ column: String, _ value: some PostgresEncodable & Sendable, in database: Database)
        async throws -> Bool
    {
        let rows = try await database.client.query(
            """
            SELECT (h.t_infomask2 & 32768) <> 0
            FROM \(unescaped: table) x
            CROSS JOIN LATERAL heap_page_items(get_raw_page(\(table), (x.ctid::text::point)[0]::int)) h
            WHERE x.\(unescaped: column) = \(value) AND h.lp = (x.ctid::text::point)[1]::int
            """)
        return try await only(rows.decode(Bool.self), "\(table) where \(column) is \(value)")
    }

    /// The page a row of `table` is stored on.
    static func page(_ table: String, _ column: String, _ value: some PostgresEncodable & Sendable, in database: Database) async throws
        -> Int
    {
        let rows = try await database.client.query(
            "SELECT (ctid::text::point)[0]::int FROM \(unescaped: table) WHERE \(unescaped: column) = \(value)")
        return try await only(rows.decode(Int.self), "\(table) where \(column) is \(value)")
    }

    /// The one value `values` holds; more or fewer rows of `what` is an error.
    private static func only<T>(_ values: some AsyncSequence<T, any Error>, _ what: String) async throws -> T {
        var found: [T] = []
        for try await value in values { found.append(value) }
        guard found.count == 1, let value = found.first else { throw Unexpected(description: "\(found.count) rows of \(what)") }
        return value
    }

    /// The indexes of `table`: each one's name and definition (`pg_get_indexdef`).
    static func indexes(of table: String, in database: Database) async throws -> [(name: String, definition: String)] {
        let rows = try await database.client.query(
            "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = \(table)::regclass")
        var definitions: [(name: String, definition: String)] = []
        for try await (name, definition) in rows.decode((String, String).self) { definitions.append((name, definition)) }
        return definitions
    }

    /// Each index of `indexes` that names one of `columns` as a whole word (in its key, an
    /// expression or its predicate), said as "index names column: definition". An update that
    /// changes such a column is never in place.
    static func naming(_ columns: [String], in indexes: [(name: String, definition: String)]) -> [String] {
        indexes.flatMap { index in
            columns.filter { names(index.definition, $0) }.map { "\(index.name) names \($0): \(index.definition)" }
        }
    }

    /// Whether an index definition names `column` as a whole word.
    static func names(_ definition: String, _ column: String) -> Bool {
        definition.range(of: "\\b\(column)\\b", options: .regularExpression) != nil
    }

    struct Unexpected: Error, CustomStringConvertible {
        let description: String
    }
}

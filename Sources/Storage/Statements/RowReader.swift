import Foundation
import PostgresNIO

/// Reads a row's columns in order, so one SELECT can carry several entities side by side
/// (an API key and its tenant) and each entity's decoder reads its own run of columns.
/// `"a, b"` → `"t.a, t.b"`: a repository's column list qualified for a join.
func qualified(_ columns: String, alias: String) -> String {
    columns.split(separator: ",").map { "\(alias).\($0.trimmingCharacters(in: .whitespacesAndNewlines))" }
        .joined(separator: ", ")
}

struct RowReader {
    private let row: PostgresRandomAccessRow
    private var index: Int

    init(_ row: PostgresRow, startingAt index: Int = 0) {
        self.row = row.makeRandomAccess()
        self.index = index
    }

    mutating func next<T: PostgresDecodable>(_ type: T.Type = T.self) throws -> T {
        defer { index += 1 }
        return try row[index].decode(T.self)
    }
}

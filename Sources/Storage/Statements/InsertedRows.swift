import BrokerCore
import Foundation

/// Rows for one `INSERT … SELECT … FROM json_populate_recordset(NULL::table, $1)`: a JSON
/// array of objects keyed by column name, each value a JSON string in the column type's text
/// form (as `COPY`'s text format would carry it), a boolean, or null. The values are written
/// in the order of `columns`.
struct InsertedRows {
    private var writer: JSONWriter
    let columns: [String]
    private var column = 0

    init(columns: [String], capacity: Int) {
        self.columns = columns
        writer = JSONWriter(capacity: capacity)
        writer.beginArray()
    }

    /// The rows written, as the JSON text of the statement's one parameter.
    var json: String {
        var finished = writer
        finished.endArray()
        return String(decoding: finished.bytes, as: UTF8.self)
    }

    /// The next column's name; a row's first value opens its object.
    private mutating func name() -> String {
        if column == 0 { writer.beginObject() }
        defer { column += 1 }
        return columns[column]
    }

    mutating func endRow() {
        writer.endObject()
        column = 0
    }

    mutating func null() { writer.member(name(), String?.none) }

    mutating func text(_ value: String?) { writer.member(name(), value) }

    mutating func uuid(_ value: UUID?) { text(value?.lowercasedString) }

    mutating func bool(_ value: Bool) { writer.member(name(), value) }

    /// `2026-11-18T11:06:40.123456Z`: UTC with microseconds.
    mutating func timestamp(_ value: Date?) { text(value?.iso8601MicrosecondsString) }

    /// A `bytea` in hex form (`\x…`).
    mutating func bytes(_ value: Data?) { text(value.map { "\\x" + Hex.encode($0) }) }
}

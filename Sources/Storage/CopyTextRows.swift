import BrokerCore
import Foundation
import NIOCore

/// Rows for `COPY … FROM STDIN` in PostgreSQL's text format: one line per row, columns
/// separated by tabs, `\N` for NULL, and backslash, tab, newline and carriage return escaped
/// in values. PostgresNIO sends the bytes (`PostgresConnection.copyFrom`); this only writes them.
struct CopyTextRows {
    private(set) var buffer: ByteBuffer
    private var atRowStart = true

    init(capacity: Int) {
        buffer = ByteBuffer()
        buffer.reserveCapacity(capacity)
    }

    private mutating func separate() {
        if atRowStart { atRowStart = false } else { buffer.writeInteger(UInt8(ascii: "\t")) }
    }

    mutating func endRow() {
        buffer.writeInteger(UInt8(ascii: "\n"))
        atRowStart = true
    }

    mutating func null() {
        separate()
        buffer.writeStaticString("\\N")
    }

    mutating func text(_ value: String?) {
        guard let value else { return null() }
        separate()
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\\"): buffer.writeStaticString("\\\\")
            case UInt8(ascii: "\t"): buffer.writeStaticString("\\t")
            case UInt8(ascii: "\n"): buffer.writeStaticString("\\n")
            case UInt8(ascii: "\r"): buffer.writeStaticString("\\r")
            default: buffer.writeInteger(byte)
            }
        }
    }

    mutating func uuid(_ value: UUID?) { text(value?.lowercasedString) }

    mutating func bool(_ value: Bool) {
        separate()
        buffer.writeInteger(value ? UInt8(ascii: "t") : UInt8(ascii: "f"))
    }

    /// `2026-11-18T11:06:40.123456Z`: UTC with microseconds.
    mutating func timestamp(_ value: Date?) {
        guard let value else { return null() }
        text(value.iso8601MicrosecondsString)
    }

    /// A `bytea` in hex form (`\x…`, its backslash escaped for COPY).
    mutating func bytes(_ value: Data?) {
        guard let value else { return null() }
        separate()
        buffer.writeStaticString("\\\\x")
        buffer.writeString(Hex.encode(value))
    }
}

import BrokerApplication
import BrokerCore
import Foundation
import OpenAPIRuntime

/// Dates in API bodies as RFC 3339 / ISO 8601 (`2026-11-20T10:00:00Z`), written by
/// `Date.iso8601String` (what swift-foundation's `.iso8601` style writes) and read with that
/// style: the runtime's default goes through ISO8601DateFormatter and ICU, which showed
/// as a measurable share of a sign-in's CPU.
struct ISO8601Transcoder: DateTranscoder {
    func encode(_ date: Date) throws -> String { Self.string(date) }

    /// The text every API date is written as.
    static func string(_ date: Date) -> String { date.iso8601String }

    func decode(_ string: String) throws -> Date {
        if let date = try? Date(string, strategy: .iso8601) { return date }
        return try Date(string, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}

import Foundation
import OpenAPIRuntime

/// Dates in API bodies as RFC 3339 / ISO 8601 (`2026-11-20T10:00:00Z`), with swift-foundation's
/// format style: the runtime's default goes through ISO8601DateFormatter and ICU, which showed
/// as a measurable share of a sign-in's CPU.
struct ISO8601Transcoder: DateTranscoder {
    func encode(_ date: Date) throws -> String { Self.string(date) }

    /// The text every API date is written as.
    static func string(_ date: Date) -> String { date.formatted(.iso8601) }

    func decode(_ string: String) throws -> Date {
        if let date = try? Date(string, strategy: .iso8601) { return date }
        return try Date(string, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}

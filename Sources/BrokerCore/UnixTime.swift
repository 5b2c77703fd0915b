import Foundation

/// Instants that arrive as numbers from outside: a token's `iat`, `exp` and `nbf` (seconds),
/// Apple's `event_time` (milliseconds). Only years 0001 to 9999 are instants: what PostgreSQL's
/// `timestamptz` stores, what ``Date/iso8601String`` writes, and what converts to microseconds
/// in an `Int` (PostgresNIO binds a `Date` that way, and traps on one that does not fit). A
/// number outside, a fraction of a nanosecond, `1.8e18` milliseconds read as seconds: nil, never
/// a trap (issue 39 C9: one Apple notification with `event_time` in nanoseconds stopped the
/// process). The trap is PostgresNIO's (1.33.2: `Date.encode` is non-throwing and converts with
/// `Int64(_:)`; `Benchmarks/upstream`'s `repro-date-trap` exits 0 while it does). The range
/// stays either way: it is the broker's rule for instants (docs/upstream.md, "A far Date traps").
public enum UnixTime {
    /// 0001-01-01T00:00:00Z.
    public static let earliest: TimeInterval = -62_135_596_800
    /// 9999-12-31T23:59:59.999Z: a `Double` this far from 1970 is exact to about 30 µs, and
    /// `…799.999999` would round up to year 10000.
    public static let latest: TimeInterval = 253_402_300_799.999

    /// The instant `seconds` after 1970-01-01T00:00:00Z; nil outside years 0001 to 9999.
    public static func date(seconds: Double) -> Date? {
        guard seconds.isFinite, seconds >= earliest, seconds <= latest else { return nil }
        return Date(timeIntervalSince1970: seconds)
    }

    /// The instant `milliseconds` after 1970-01-01T00:00:00Z; nil outside years 0001 to 9999.
    public static func date(milliseconds: Double) -> Date? {
        guard milliseconds.isFinite else { return nil }
        return date(seconds: milliseconds / 1_000)
    }

    /// Microseconds since 1970 toward zero, the instant held to years 0001 to 9999 first: a
    /// date the broker made itself is always inside, and no date can trap here.
    public static func microseconds(_ date: Date) -> Int {
        let seconds = min(max(date.timeIntervalSince1970.isNaN ? 0 : date.timeIntervalSince1970, earliest), latest)
        return Int((seconds * 1_000_000).rounded(.towardZero))
    }
}

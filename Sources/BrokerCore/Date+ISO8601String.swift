import Foundation

extension Date {
    /// `2026-11-21T04:59:18Z`: UTC, whole seconds, the fraction dropped: what Foundation's
    /// `formatted(.iso8601)` writes, without building a format style per call (four dates in
    /// every sign-in response). Years outside 1600–9999 go to Foundation (which switches to the
    /// Julian calendar before 1582).
    public var iso8601String: String {
        let seconds = timeIntervalSince1970.rounded(.down)
        guard seconds.isFinite, let total = Int64(exactly: seconds), total >= -11_676_096_000, total < 253_402_300_800 else {
            return formatted(.iso8601)
        }
        var days = total / 86_400
        var secondOfDay = total % 86_400
        if secondOfDay < 0 {
            secondOfDay += 86_400
            days -= 1
        }
        // Days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant's civil_from_days).
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)

        return String(unsafeUninitializedCapacity: 20) { buffer in
            func put(_ value: Int64, digits: Int, at offset: Int) {
                var value = value
                for position in stride(from: offset + digits - 1, through: offset, by: -1) {
                    buffer[position] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
            }
            put(year, digits: 4, at: 0)
            buffer[4] = UInt8(ascii: "-")
            put(month, digits: 2, at: 5)
            buffer[7] = UInt8(ascii: "-")
            put(day, digits: 2, at: 8)
            buffer[10] = UInt8(ascii: "T")
            put(secondOfDay / 3_600, digits: 2, at: 11)
            buffer[13] = UInt8(ascii: ":")
            put(secondOfDay / 60 % 60, digits: 2, at: 14)
            buffer[16] = UInt8(ascii: ":")
            put(secondOfDay % 60, digits: 2, at: 17)
            buffer[19] = UInt8(ascii: "Z")
            return 20
        }
    }

    /// `2026-11-21T04:59:18.123456Z`: UTC with microseconds (exports that must read back the
    /// same instant).
    public var iso8601MicrosecondsString: String {
        let whole = timeIntervalSince1970.rounded(.down)
        let micros = Int(((timeIntervalSince1970 - whole) * 1_000_000).rounded())
        let carried = micros == 1_000_000
        let seconds = Date(timeIntervalSince1970: whole + (carried ? 1 : 0)).iso8601String
        return String(seconds.dropLast()) + "." + String(String((carried ? 0 : micros) + 1_000_000).dropFirst()) + "Z"
    }
}

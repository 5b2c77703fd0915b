import BrokerCore
import Foundation

/// The format of a bulk user import file (issue 24, docs/import.md): `broker import users --from`.
package enum ImportSource: String, Sendable, CaseIterable {
    /// `firebase auth:export` JSON: one `users[]` element per person.
    case firebase
    /// An Auth0 user export: one NDJSON line per person.
    case auth0
    /// One JSON line per `auth.users` row, with an `identities` array of its `auth.identities` rows.
    case supabase
    /// The broker's own format, one account per line (what `broker export users` writes).
    case jsonl
}

extension ImportSource {
    /// One user object of the source (a Firebase `users[]` element, an Auth0 NDJSON line, a
    /// Supabase JSON line, a broker jsonl line) → what it becomes: a record, a person skipped
    /// for having no social identity, or an error with a short reason.
    package func item(from value: JSONValue) -> ImportItem {
        item(from: value, now: Date())
    }

    /// ``item(from:)`` at `now`: a Supabase `banned_until` disables the person only while it
    /// is in the future.
    package func item(from value: JSONValue, now: Date) -> ImportItem {
        do throws(ImportRejection) {
            switch self {
            case .firebase: return try FirebaseUserFormat.item(from: value)
            case .auth0: return try Auth0UserFormat.item(from: value)
            case .supabase: return try SupabaseUserFormat.item(from: value, now: now)
            case .jsonl: return try BrokerUserFormat.item(from: value)
            }
        } catch {
            return .error(error.reason)
        }
    }
}

/// Why one user object cannot be imported: the short reason the report and the error file print.
/// It never holds a whole email address.
struct ImportRejection: Error, Sendable, Equatable {
    let reason: String

    init(_ reason: String) {
        self.reason = reason
    }
}

/// One JSON object of an import file, read member by member. `path` is where it sits in the user
/// object (`""` for the user, `identities[1]` for an identity), so a reason names the field as the
/// source spells it. An absent member and `null` read alike: absent.
struct ImportObject {
    let members: [String: JSONValue]
    let path: String

    init(_ value: JSONValue, path: String = "") throws(ImportRejection) {
        guard let members = value.object else {
            throw ImportRejection(path.isEmpty ? "the user is not a JSON object" : "\(path) is not an object")
        }
        self.members = members
        self.path = path
    }

    /// `name` as the reason names it: `email`, `identities[0].user_id`.
    func field(_ name: String) -> String { path.isEmpty ? name : "\(path).\(name)" }

    /// The member, nil when absent or null.
    func value(_ name: String) -> JSONValue? {
        guard let value = members[name], !value.isNull else { return nil }
        return value
    }

    func string(_ name: String) throws(ImportRejection) -> String? {
        guard let value = value(name) else { return nil }
        guard let string = value.string else { throw ImportRejection("\(field(name)) is not a string") }
        return string
    }

    /// The string, nil when absent, null or empty (sources write `""` for "none").
    func nonEmptyString(_ name: String) throws(ImportRejection) -> String? {
        guard let string = try string(name), !string.isEmpty else { return nil }
        return string
    }

    func requiredString(_ name: String) throws(ImportRejection) -> String {
        guard let string = try string(name) else { throw ImportRejection("\(field(name)) is missing") }
        guard !string.isEmpty else { throw ImportRejection("\(field(name)) is empty") }
        return string
    }

    /// `true` or `false`, nothing else.
    func bool(_ name: String) throws(ImportRejection) -> Bool? {
        guard let value = value(name) else { return nil }
        guard case .bool(let bool) = value else { throw ImportRejection("\(field(name)) is not true or false") }
        return bool
    }

    /// `true` or `false`, or the strings `"true"` and `"false"`: what providers put in
    /// `email_verified` (Apple's identity tokens carry it as a string).
    func lenientBool(_ name: String) throws(ImportRejection) -> Bool? {
        switch value(name) {
        case nil: return nil
        case .bool(let bool): return bool
        case .string("true"): return true
        case .string("false"): return false
        default: throw ImportRejection("\(field(name)) is not true or false")
        }
    }

    func object(_ name: String) throws(ImportRejection) -> ImportObject? {
        guard let value = value(name) else { return nil }
        return try ImportObject(value, path: field(name))
    }

    func array(_ name: String) throws(ImportRejection) -> [JSONValue]? {
        guard let value = value(name) else { return nil }
        guard let array = value.array else { throw ImportRejection("\(field(name)) is not an array") }
        return array
    }

    /// The objects of an array member, each with its path (`identities[2]`); none when absent.
    func objects(_ name: String) throws(ImportRejection) -> [ImportObject] {
        var objects: [ImportObject] = []
        for (index, element) in (try array(name) ?? []).enumerated() {
            objects.append(try ImportObject(element, path: "\(field(name))[\(index)]"))
        }
        return objects
    }

    /// A provider's user id: a string, or an integer that JSON carries exactly (Auth0 and
    /// Supabase write some ids as numbers). A number past 2^53 has lost digits already: refused.
    func identifierText(_ name: String) throws(ImportRejection) -> String? {
        switch value(name) {
        case nil: return nil
        case .string(let string): return string
        case .number:
            guard let integer = value(name)?.integer(in: 0...9_007_199_254_740_991) else {
                throw ImportRejection("\(field(name)) is a number JSON cannot carry exactly; write it as a string")
            }
            return String(integer)
        default: throw ImportRejection("\(field(name)) is not a string")
        }
    }

    /// An ISO 8601 date and time with a zone (``ImportDate/parse(_:)``).
    func date(_ name: String) throws(ImportRejection) -> Date? {
        guard let text = try nonEmptyString(name) else { return nil }
        guard let date = ImportDate.parse(text) else {
            throw ImportRejection("\(field(name)) is not an ISO 8601 date and time with a zone")
        }
        return date
    }
}

/// The rules every format's values meet, whatever the source (docs/import.md).
enum ImportCheck {
    static let maxIdentifierBytes = 255
    static let maxEmailBytes = 320

    /// The source's user id: non-empty, at most 255 bytes, no control character.
    static func externalID(_ text: String, field: String) throws(ImportRejection) -> String {
        try identifier(text, field: field)
    }

    /// A provider's subject: non-empty, at most 255 bytes, no control character.
    static func subject(_ text: String, field: String) throws(ImportRejection) -> String {
        try identifier(text, field: field)
    }

    /// Where a subject is unique (Apple team, Facebook app id): at most 255 bytes, no control
    /// character. Empty is allowed: Google's scope is empty.
    static func providerScope(_ text: String?, field: String) throws(ImportRejection) -> String? {
        guard let text else { return nil }
        guard text.utf8.count <= maxIdentifierBytes else { throw ImportRejection("\(field) is longer than \(maxIdentifierBytes) bytes") }
        guard !text.unicodeScalars.contains(where: FreeText.isForbidden) else {
            throw ImportRejection("\(field) contains a control character")
        }
        return text
    }

    private static func identifier(_ text: String, field: String) throws(ImportRejection) -> String {
        guard !text.isEmpty else { throw ImportRejection("\(field) is empty") }
        guard text.utf8.count <= maxIdentifierBytes else { throw ImportRejection("\(field) is longer than \(maxIdentifierBytes) bytes") }
        guard !text.unicodeScalars.contains(where: FreeText.isForbidden) else {
            throw ImportRejection("\(field) contains a control character")
        }
        return text
    }

    /// A provider name after normalisation: `^[a-z0-9][a-z0-9._-]{0,63}$`.
    static func provider(_ name: String, field: String) throws(ImportRejection) -> String {
        guard isProviderName(name) else {
            let shown = FreeText.escaped(String(name.prefix(64)))
            throw ImportRejection("\(field) \"\(shown)\" is not a provider name (lowercase letters, digits, '.', '_' or '-')")
        }
        return name
    }

    static func isProviderName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard let first = bytes.first, bytes.count <= 64, isLowercaseLetterOrDigit(first) else { return false }
        let punctuation: [UInt8] = [UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-")]
        return bytes.dropFirst().allSatisfy { isLowercaseLetterOrDigit($0) || punctuation.contains($0) }
    }

    private static func isLowercaseLetterOrDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    /// The email when it looks like one (``isEmailAddress(_:)``); nil stays nil. The reason
    /// shows the domain only, never the whole address.
    static func email(_ text: String?, field: String) throws(ImportRejection) -> String? {
        guard let text else { return nil }
        guard isEmailAddress(text) else { throw ImportRejection("\(field) \(masked(text)) is not an email address") }
        return text
    }

    /// One `@`, a non-empty local part, a domain with a dot (not first or last), no white space
    /// or control character, at most 320 bytes. A shape check, not RFC 5321.
    static func isEmailAddress(_ text: String) -> Bool {
        guard text.utf8.count <= maxEmailBytes else { return false }
        guard !text.unicodeScalars.contains(where: { isWhitespace($0) || FreeText.isForbidden($0) }) else { return false }
        let parts = text.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty else { return false }
        let domain = parts[1]
        return domain.utf8.contains(UInt8(ascii: ".")) && domain.utf8.first != UInt8(ascii: ".") && domain.utf8.last != UInt8(ascii: ".")
    }

    /// White space, with ASCII answered without Unicode's property tables (a tenth of an
    /// import's CPU went to them).
    private static func isWhitespace(_ scalar: Unicode.Scalar) -> Bool {
        scalar.isASCII ? scalar == " " || (0x09...0x0D).contains(scalar.value) : scalar.properties.isWhitespace
    }

    /// `"…@example"`: what a reason shows of a bad address.
    private static func masked(_ text: String) -> String {
        if text.isEmpty { return "(empty)" }
        if text.utf8.count > maxEmailBytes { return "(longer than \(maxEmailBytes) bytes)" }
        guard let at = text.lastIndex(of: "@") else { return "(no @)" }
        let domain = FreeText.escaped(String(text[text.index(after: at)...].prefix(64)))
        return "\"…@\(domain)\""
    }

    /// Two emails that name the same mailbox as far as the import can tell (case ignored).
    static func sameEmail(_ a: String?, _ b: String?) -> Bool {
        guard let a, let b else { return false }
        return a == b || a.lowercased() == b.lowercased()
    }
}

/// People's names read from a source, cleaned as sign-in cleans them: control characters,
/// line breaks and bidirectional overrides dropped, trimmed, at most 200 characters, none when blank.
enum ImportName {
    static func clean(_ value: String?) -> String? { ProviderIdentity.clean(value) }

    /// A display name split on its first space: `Ada King Lovelace` → `Ada` / `King Lovelace`;
    /// a single word is the given name only.
    static func split(_ displayName: String?) -> PersonName {
        guard let name = clean(displayName) else { return PersonName(givenName: nil, familyName: nil) }
        guard let space = name.firstIndex(of: " ") else { return PersonName(givenName: name, familyName: nil) }
        return PersonName(givenName: clean(String(name[..<space])), familyName: clean(String(name[name.index(after: space)...])))
    }
}

/// The ways a source user signs in that are not social identities: counted, never imported.
struct OtherLogins {
    /// `password`, `phone`, `email link`, …, in the order first seen, each once.
    private(set) var kinds: [String] = []

    mutating func insert(_ kind: String) {
        if !kinds.contains(kind) { kinds.append(kind) }
    }

    var isEmpty: Bool { kinds.isEmpty }

    /// `password login only`, `password and phone logins only`.
    var description: String {
        switch kinds.count {
        case 0: "no sign-in method in the export"
        case 1: "\(kinds[0]) login only"
        default: "\(kinds.dropLast().joined(separator: ", ")) and \(kinds[kinds.count - 1]) logins only"
        }
    }
}

extension ImportRecord {
    /// What the read person becomes: refused when two identities repeat a provider and
    /// subject, skipped when it has no social identity (saying what it had instead, or
    /// `orElse` when it had nothing), else the record, with ``hadPasswordOrPhone`` set from
    /// `otherLogins`.
    func importItem(otherLogins: OtherLogins, orElse nothing: String? = nil) throws(ImportRejection) -> ImportItem {
        var seen = Set<ExactText>()
        for identity in identities {
            guard seen.insert(ExactText(identity.provider + "\u{0}" + identity.subject)).inserted else {
                let subject = FreeText.escaped(String(identity.subject.prefix(64)))
                throw ImportRejection("two identities have provider \(identity.provider) and subject \"\(subject)\"")
            }
        }
        guard !identities.isEmpty else {
            let had = otherLogins.isEmpty ? (nothing ?? otherLogins.description) : otherLogins.description
            return .skipped(externalID: externalID, reason: "no social identity (\(had))")
        }
        var record = self
        record.hadPasswordOrPhone = !otherLogins.isEmpty
        return .record(record)
    }
}

/// ISO 8601 dates of import files, read by hand: no formatter to share between tasks.
enum ImportDate {
    /// `2024-01-02T03:04:05Z`, `2024-01-02T03:04:05.678+01:00`, `2024-01-02 03:04:05.123456+00`
    /// (PostgreSQL's text form): a date, `T` or a space, a time with an optional fraction of up to
    /// nine digits, and a zone (`Z`, `±HH`, `±HHMM`, `±HH:MM`). nil for anything else, a time
    /// without a zone included: it could be any zone.
    static func parse(_ text: String) -> Date? {
        var reader = DigitReader(bytes: Array(text.utf8))
        guard let year = reader.number(digits: 4), reader.skip("-"), let month = reader.number(digits: 2), reader.skip("-"),
            let day = reader.number(digits: 2)
        else { return nil }
        guard reader.skip("T") || reader.skip("t") || reader.skip(" ") else { return nil }
        guard let hour = reader.number(digits: 2), reader.skip(":"), let minute = reader.number(digits: 2), reader.skip(":"),
            let second = reader.number(digits: 2)
        else { return nil }
        var fraction = ""
        if reader.skip(".") {
            while let digit = reader.digit() { fraction.append(Character(Unicode.Scalar(UInt8(ascii: "0") + digit))) }
            guard (1...9).contains(fraction.count) else { return nil }
        }
        var offset = 0
        if !(reader.skip("Z") || reader.skip("z")) {
            let sign: Int
            if reader.skip("+") {
                sign = 1
            } else if reader.skip("-") {
                sign = -1
            } else {
                return nil
            }
            guard let hours = reader.number(digits: 2), hours <= 23 else { return nil }
            var minutes = 0
            if reader.skip(":") {
                guard let value = reader.number(digits: 2) else { return nil }
                minutes = value
            } else if !reader.isAtEnd {
                guard let value = reader.number(digits: 2) else { return nil }
                minutes = value
            }
            guard minutes <= 59 else { return nil }
            offset = sign * (hours * 3_600 + minutes * 60)
        }
        guard reader.isAtEnd, year >= 1, (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day), hour <= 23,
            minute <= 59, second <= 59
        else { return nil }
        let seconds = daysFrom1970(year: year, month: month, day: day) * 86_400 + hour * 3_600 + minute * 60 + second - offset
        guard !fraction.isEmpty else { return Date(timeIntervalSince1970: TimeInterval(seconds)) }
        // "1704164645.678" read as one number: the nearest Double, as a literal would be.
        if seconds >= 0, let exact = TimeInterval("\(seconds).\(fraction)") { return Date(timeIntervalSince1970: exact) }
        return Date(timeIntervalSince1970: TimeInterval(seconds) + (TimeInterval("0.\(fraction)") ?? 0))
    }

    /// Epoch milliseconds as Firebase writes them (`"1704164645000"`): digits only, up to year 9999.
    static func epochMilliseconds(_ text: String) -> Date? {
        guard (1...15).contains(text.utf8.count), text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
            let milliseconds = Int64(text), milliseconds <= 253_402_300_799_999
        else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(milliseconds) / 1_000)
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's days_from_civil).
    private static func daysFrom1970(year: Int, month: Int, day: Int) -> Int {
        let shiftedYear = month <= 2 ? year - 1 : year
        let era = (shiftedYear >= 0 ? shiftedYear : shiftedYear - 399) / 400
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// Reads ASCII digits and separators off the front of a text.
    private struct DigitReader {
        let bytes: [UInt8]
        var index = 0

        var isAtEnd: Bool { index == bytes.count }

        mutating func skip(_ character: Unicode.Scalar) -> Bool {
            guard index < bytes.count, bytes[index] == UInt8(ascii: character) else { return false }
            index += 1
            return true
        }

        mutating func digit() -> UInt8? {
            guard index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) else { return nil }
            defer { index += 1 }
            return bytes[index] - UInt8(ascii: "0")
        }

        /// Exactly `digits` digits as a number.
        mutating func number(digits: Int) -> Int? {
            var value = 0
            for _ in 0..<digits {
                guard let digit = digit() else { return nil }
                value = value * 10 + Int(digit)
            }
            return value
        }
    }
}

import Foundation

/// Reads an import file one user at a time, in bounded memory whatever its size (issue 24):
/// JSON lines (the broker's format, Auth0's NDJSON, Supabase's rows), or the elements of the
/// `users` array of a Firebase export, found by tracking strings and nesting (each element is
/// then parsed on its own). Each user comes with the line it starts on (1-based) and the byte
/// offset just after it, which is where a resumed job starts reading. A user longer than
/// ``maxUserBytes`` is skipped, not kept, and comes back ``User/oversized`` (issue 39 F17): the
/// import reports its line and goes on. A file whose structure breaks (a Firebase export cut
/// off in the middle) throws a ``Failure`` naming the byte where it breaks; every user before
/// it has been returned.
package struct ImportFileReader: Sendable {
    package enum Layout: Sendable {
        /// One JSON value per line; blank lines are skipped.
        case lines
        /// `{"users": [ {...}, ... ]}`.
        case usersArray
    }

    package struct User: Sendable {
        package let bytes: [UInt8]
        /// The line the user starts on (1-based).
        package let line: Int
        /// The line `endOffset` lies on (after a JSON line's newline: the next line): a job
        /// resumed after this user opens the file at `endOffset` with this line.
        package var endLine: Int
        package let endOffset: Int64
        /// The user is longer than ``maxUserBytes``: its bytes were skipped (``bytes`` is empty).
        package let oversized: Bool

        init(bytes: [UInt8], line: Int, endLine: Int? = nil, endOffset: Int64, oversized: Bool = false) {
            self.bytes = bytes
            self.line = line
            self.endLine = endLine ?? line
            self.endOffset = endOffset
            self.oversized = oversized
        }
    }

    package enum Failure: Error, Equatable, CustomStringConvertible {
        /// The file is not a JSON object with a `users` array (Firebase): at byte `offset`, on
        /// line `line`.
        case notAUsersDocument(line: Int, offset: Int64)
        /// The file ends at byte `offset` (its length), on line `line`, before its `users` array
        /// closes: inside the user that starts on `userLine`, or between users (nil). A Firebase
        /// export cut off in the middle.
        case truncated(line: Int, offset: Int64, userLine: Int?)

        package var description: String {
            switch self {
            case .notAUsersDocument(let line, let offset):
                "byte \(offset) (line \(line)): the file is not a Firebase export: expected {\"users\": [ ... ]} (firebase auth:export --format=json)"
            case .truncated(let line, let offset, let userLine?):
                "the file ends at byte \(offset) (line \(line)) inside the user that starts on line \(userLine): it was cut off"
            case .truncated(let line, let offset, nil):
                "the file ends at byte \(offset) (line \(line)) before its users array is closed: it was cut off"
            }
        }

        /// The byte where the file breaks.
        package var offset: Int64 {
            switch self {
            case .notAUsersDocument(_, let offset), .truncated(_, let offset, _): offset
            }
        }
    }

    /// The longest user read (a Firebase user with many providers is a few kilobytes).
    package static let maxUserBytes = 1 << 20
    static let chunkBytes = 1 << 20

    private let handle: FileHandle
    private let layout: Layout
    private var buffer: [UInt8] = []
    private var position = 0
    /// The file offset of `buffer[0]`.
    private var bufferOffset: Int64
    private var line: Int
    private var atEnd = false
    /// Firebase: the `users` array has been entered (true when resuming inside it).
    private var inArray: Bool
    private var arrayClosed = false

    /// Opens `path` at `offset` (0, or a job's cursor), which lies on line `line` (1-based).
    package init(path: String, layout: Layout, offset: Int64 = 0, line: Int = 1) throws {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw CocoaError(.fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: path])
        }
        if offset > 0 { try handle.seek(toOffset: UInt64(offset)) }
        self.handle = handle
        self.layout = layout
        self.bufferOffset = offset
        self.line = max(1, line)
        self.inArray = offset > 0
    }

    package func close() { try? handle.close() }

    /// Where the next user is read from: the byte after the last one returned (or the start
    /// offset), and its line. A batch that stops before a user ends here.
    package var offset: Int64 { bufferOffset + Int64(position) }
    package var currentLine: Int { line }

    /// The next user, or nil at the end of the file.
    package mutating func next() throws -> User? {
        switch layout {
        case .lines: try nextLine()
        case .usersArray: try nextElement()
        }
    }

    private mutating func fill() throws -> Bool {
        guard !atEnd else { return false }
        if position > 0 {
            buffer.removeFirst(position)
            bufferOffset += Int64(position)
            position = 0
        }
        guard let data = try handle.read(upToCount: Self.chunkBytes), !data.isEmpty else {
            atEnd = true
            return false
        }
        buffer.append(contentsOf: data)
        return true
    }

    private mutating func nextLine() throws -> User? {
        var searched = position
        while true {
            if let newline = buffer[searched...].firstIndex(of: UInt8(ascii: "\n")) {
                let oversized = newline - position > Self.maxUserBytes
                let bytes = oversized ? [] : Array(buffer[position..<newline])
                let startLine = line
                line += 1
                position = newline + 1
                searched = position
                if !oversized && bytes.allSatisfy(Self.isWhitespace) { continue }
                return User(bytes: bytes, line: startLine, endLine: line, endOffset: bufferOffset + Int64(position), oversized: oversized)
            }
            guard buffer.count - position <= Self.maxUserBytes else { return try skipLongLine() }
            let pending = buffer.count - position
            guard try fill() else {
                // The last line has no newline.
                let oversized = buffer.count - position > Self.maxUserBytes
                let bytes = oversized ? [] : Array(buffer[position...])
                position = buffer.count
                if !oversized && bytes.allSatisfy(Self.isWhitespace) { return nil }
                let startLine = line
                line += 1
                return User(bytes: bytes, line: startLine, endLine: line, endOffset: bufferOffset + Int64(position), oversized: oversized)
            }
            searched = position + pending
        }
    }

    /// The rest of a line longer than ``maxUserBytes``, read and dropped chunk by chunk (memory
    /// stays bounded): the line comes back ``User/oversized``.
    private mutating func skipLongLine() throws -> User {
        let startLine = line
        while true {
            if let newline = buffer[position...].firstIndex(of: UInt8(ascii: "\n")) {
                position = newline + 1
                line += 1
                return User(bytes: [], line: startLine, endLine: line, endOffset: bufferOffset + Int64(position), oversized: true)
            }
            position = buffer.count
            guard try fill() else {
                line += 1
                return User(bytes: [], line: startLine, endLine: line, endOffset: bufferOffset + Int64(position), oversized: true)
            }
        }
    }

    private mutating func nextElement() throws -> User? {
        if !inArray { try enterUsersArray() }
        while true {
            guard let byte = try peek() else {
                if arrayClosed { return nil }
                throw Failure.truncated(line: line, offset: offset, userLine: nil)
            }
            switch byte {
            case UInt8(ascii: "\n"):
                line += 1
                position += 1
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"), UInt8(ascii: ","):
                position += 1
            case UInt8(ascii: "]"):
                position += 1
                arrayClosed = true
                return nil
            case UInt8(ascii: "{"):
                return try element()
            default:
                throw Failure.notAUsersDocument(line: line, offset: offset)
            }
        }
    }

    private mutating func peek() throws -> UInt8? {
        if arrayClosed { return nil }
        while position >= buffer.count {
            guard try fill() else { return nil }
        }
        return buffer[position]
    }

    /// Skips to the `[` of the top-level `"users"` member.
    private mutating func enterUsersArray() throws {
        var depth = 0
        var strings = StringScan()
        var key: [UInt8] = []
        var lastKey: [UInt8] = []
        while let byte = try peek() {
            position += 1
            let wasInString = strings.inside
            if strings.take(byte) {
                if !wasInString {
                    // A string outside the top-level object: not an export.
                    guard depth > 0 else { throw Failure.notAUsersDocument(line: line, offset: offset - 1) }
                    key = []
                } else if !strings.inside {
                    if depth == 1 { lastKey = key }
                } else if key.count < 16 {
                    key.append(byte)
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\n"): line += 1
            case UInt8(ascii: "{"): depth += 1
            case UInt8(ascii: "}"): depth -= 1
            case UInt8(ascii: "["):
                if depth == 1 && lastKey == Array("users".utf8) {
                    inArray = true
                    return
                }
                depth += 1
            case UInt8(ascii: "]"): depth -= 1
            default: break
            }
            guard depth >= 0 && (depth > 0 || byte == UInt8(ascii: "{") || Self.isWhitespace(byte)) else {
                throw Failure.notAUsersDocument(line: line, offset: offset - 1)
            }
        }
        throw Failure.notAUsersDocument(line: line, offset: offset)
    }

    /// One `{...}` element, from its opening brace. One longer than ``maxUserBytes`` is read
    /// to its end and dropped as it goes (``User/oversized``).
    private mutating func element() throws -> User {
        let startLine = line
        var scan = position
        var depth = 0
        var strings = StringScan()
        var newlines = 0
        var oversized = false
        while true {
            while scan < buffer.count {
                let byte = buffer[scan]
                scan += 1
                if strings.take(byte) { continue }
                switch byte {
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth == 0 {
                        oversized = oversized || scan - position > Self.maxUserBytes
                        let bytes = oversized ? [] : Array(buffer[position..<scan])
                        position = scan
                        line += newlines
                        return User(
                            bytes: bytes, line: startLine, endLine: line, endOffset: bufferOffset + Int64(position), oversized: oversized)
                    }
                case UInt8(ascii: "\n"): newlines += 1
                default: break
                }
            }
            if scan - position > Self.maxUserBytes || oversized {
                // Too long to keep: what was scanned is dropped, the scan goes on to the end.
                oversized = true
                position = scan
            }
            let consumed = scan - position
            guard try fill() else {
                throw Failure.truncated(line: line + newlines, offset: bufferOffset + Int64(buffer.count), userLine: startLine)
            }
            scan = position + consumed
        }
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\r") || byte == UInt8(ascii: "\n")
    }
}

/// Whether a scan of JSON bytes is inside a string, escapes included: the one rule both scans
/// of a Firebase export need to find structure outside strings.
private struct StringScan {
    private(set) var inside = false
    private var escaped = false

    /// Takes the next byte; true when it belongs to a string (its quotes included).
    mutating func take(_ byte: UInt8) -> Bool {
        guard inside else {
            inside = byte == UInt8(ascii: "\"")
            return inside
        }
        if escaped {
            escaped = false
        } else if byte == UInt8(ascii: "\\") {
            escaped = true
        } else if byte == UInt8(ascii: "\"") {
            inside = false
        }
        return true
    }
}

import Foundation

/// Reads an import file one user at a time, in bounded memory whatever its size (issue 24):
/// JSON lines (the broker's format, Auth0's NDJSON, Supabase's rows), or the elements of the
/// `users` array of a Firebase export, found by tracking strings and nesting (each element is
/// then parsed on its own). Each user comes with the line it starts on (1-based) and the byte
/// offset just after it, which is where a resumed job starts reading.
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

        init(bytes: [UInt8], line: Int, endLine: Int? = nil, endOffset: Int64) {
            self.bytes = bytes
            self.line = line
            self.endLine = endLine ?? line
            self.endOffset = endOffset
        }
    }

    package enum Failure: Error, Equatable, CustomStringConvertible {
        /// The file is not a JSON object with a `users` array (Firebase).
        case notAUsersDocument(line: Int)
        /// One user is longer than ``maxUserBytes``.
        case userTooLong(line: Int)

        package var description: String {
            switch self {
            case .notAUsersDocument(let line):
                "line \(line): the file is not a Firebase export: expected {\"users\": [ ... ]} (firebase auth:export --format=json)"
            case .userTooLong(let line): "line \(line): a user is longer than 1 MiB"
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
                let bytes = Array(buffer[position..<newline])
                let startLine = line
                line += 1
                position = newline + 1
                searched = position
                if bytes.allSatisfy(Self.isWhitespace) { continue }
                return User(bytes: bytes, line: startLine, endLine: line, endOffset: bufferOffset + Int64(position))
            }
            guard buffer.count - position <= Self.maxUserBytes else { throw Failure.userTooLong(line: line) }
            let pending = buffer.count - position
            guard try fill() else {
                // The last line has no newline.
                let bytes = Array(buffer[position...])
                position = buffer.count
                if bytes.allSatisfy(Self.isWhitespace) { return nil }
                let startLine = line
                line += 1
                return User(bytes: bytes, line: startLine, endLine: line, endOffset: bufferOffset + Int64(position))
            }
            searched = position + pending
        }
    }

    private mutating func nextElement() throws -> User? {
        if !inArray { try enterUsersArray() }
        while true {
            guard let byte = try peek() else {
                if arrayClosed { return nil }
                throw Failure.notAUsersDocument(line: line)
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
                throw Failure.notAUsersDocument(line: line)
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
                    guard depth > 0 else { throw Failure.notAUsersDocument(line: line) }
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
                throw Failure.notAUsersDocument(line: line)
            }
        }
        throw Failure.notAUsersDocument(line: line)
    }

    /// One `{...}` element, from its opening brace.
    private mutating func element() throws -> User {
        let startLine = line
        var scan = position
        var depth = 0
        var strings = StringScan()
        var newlines = 0
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
                        let bytes = Array(buffer[position..<scan])
                        position = scan
                        line += newlines
                        return User(bytes: bytes, line: startLine, endLine: line, endOffset: bufferOffset + Int64(position))
                    }
                case UInt8(ascii: "\n"): newlines += 1
                default: break
                }
            }
            guard scan - position <= Self.maxUserBytes else { throw Failure.userTooLong(line: startLine) }
            let consumed = scan - position
            guard try fill() else { throw Failure.notAUsersDocument(line: line + newlines) }
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

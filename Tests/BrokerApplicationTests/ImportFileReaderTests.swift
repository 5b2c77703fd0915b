import BrokerApplication
import BrokerCore
import Foundation
import Testing

/// Reading import files one user at a time (issue 24): JSON lines and a Firebase export's
/// `users` array, with line numbers and the offsets a resumed job starts from.
@Suite struct ImportFileReaderTests {
    static func write(_ text: String) throws -> String {
        let path = NSTemporaryDirectory() + "reader-\(UUID().uuidString.prefix(8)).json"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static func readAll(_ path: String, _ layout: ImportFileReader.Layout, offset: Int64 = 0, line: Int = 1) throws
        -> [ImportFileReader.User]
    {
        var reader = try ImportFileReader(path: path, layout: layout, offset: offset, line: line)
        defer { reader.close() }
        var users: [ImportFileReader.User] = []
        while let user = try reader.next() { users.append(user) }
        return users
    }

    @Test func linesComeWithTheirNumbersAndResumeAfterAnyOfThem() throws {
        let path = try Self.write("{\"a\":1}\n\n  \n{\"b\":2}\r\n{\"c\":3}")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let users = try Self.readAll(path, .lines)
        #expect(users.map(\.line) == [1, 4, 5])
        #expect(users.map { String(decoding: $0.bytes, as: UTF8.self) } == ["{\"a\":1}", "{\"b\":2}\r", "{\"c\":3}"])
        // A job that committed through the second user starts after it.
        let rest = try Self.readAll(path, .lines, offset: users[1].endOffset, line: users[1].endLine)
        #expect(rest.map(\.line) == [5])
        #expect(rest.first?.bytes == users[2].bytes)
    }

    @Test func firebaseUsersAreFoundInTheirArrayWithStringsAndNestingRespected() throws {
        let text = """
            {
              "kind": "export", "note": "a ] and a } and \\" in a string",
              "users": [
                {"localId": "u1", "providerUserInfo": [{"providerId": "google.com", "rawId": "1"}]},
                {
                  "localId": "u2", "displayName": "Brace } Bracket ]"
                }
              ,{"localId": "u3"}]
            }
            """
        let path = try Self.write(text)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let users = try Self.readAll(path, .usersArray)
        #expect(users.count == 3)
        #expect(users.map(\.line) == [4, 5, 8])
        let ids = try users.map { try JSONValue.parse($0.bytes).object?["localId"]?.string }
        #expect(ids == ["u1", "u2", "u3"])
        let resumed = try Self.readAll(path, .usersArray, offset: users[0].endOffset, line: users[0].endLine)
        #expect(resumed.map(\.line) == [5, 8])
        #expect(users[1].endLine == 7)
        let afterSecond = try Self.readAll(path, .usersArray, offset: users[1].endOffset, line: users[1].endLine)
        #expect(afterSecond.map(\.line) == [8])
    }

    @Test func aFileThatIsNotAFirebaseExportIsRefused() throws {
        for text in ["[1, 2]", "{\"people\": []}", "{\"users\": {\"a\": 1}}", "{\"users\": [{\"localId\": \"u1\"}"] {
            let path = try Self.write(text)
            defer { try? FileManager.default.removeItem(atPath: path) }
            #expect(throws: ImportFileReader.Failure.self, "\(text)") { try Self.readAll(path, .usersArray) }
        }
    }

    @Test func aLongFileIsReadInChunksWithTheSameResult() throws {
        var text = "{\"users\": [\n"
        let count = 20_000
        for n in 0..<count {
            text += (n == 0 ? "" : ",\n") + "{\"localId\": \"user-\(n)\", \"pad\": \"\(String(repeating: "x", count: 100))\"}"
        }
        text += "\n]}\n"
        let path = try Self.write(text)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let users = try Self.readAll(path, .usersArray)
        #expect(users.count == count)
        #expect(users.last?.line == count + 1)
        #expect(try JSONValue.parse(try #require(users.last).bytes).object?["localId"]?.string == "user-\(count - 1)")
    }

    /// A line over 1 MiB comes back oversized, without its bytes, and the next line is read
    /// (issue 39 F17 (c)); so does a last line over 1 MiB with no newline.
    @Test func aLineOverOneMebibyteComesBackOversizedAndTheNextOneIsRead() throws {
        let long = "{\"pad\":\"" + String(repeating: "x", count: ImportFileReader.maxUserBytes + 3 * 1_000_000) + "\"}"
        let path = try Self.write("{\"a\":1}\n" + long + "\n{\"c\":3}\n" + long)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let users = try Self.readAll(path, .lines)
        #expect(users.map(\.line) == [1, 2, 3, 4])
        #expect(users.map(\.oversized) == [false, true, false, true])
        #expect(users[1].bytes.isEmpty && String(decoding: users[2].bytes, as: UTF8.self) == "{\"c\":3}")
        // A job that committed through the long line starts after it.
        let rest = try Self.readAll(path, .lines, offset: users[1].endOffset, line: users[1].endLine)
        #expect(rest.map(\.line) == [3, 4])
    }

    @Test func aFirebaseUserOverOneMebibyteComesBackOversizedAndTheNextOneIsRead() throws {
        let long =
            "{\"localId\": \"big\", \"pad\": \"" + String(repeating: "}", count: ImportFileReader.maxUserBytes + 10) + "\", \"n\": [{}]}"
        let path = try Self.write("{\"users\": [\n{\"localId\": \"u1\"},\n" + long + ",\n{\"localId\": \"u3\"}\n]}\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let users = try Self.readAll(path, .usersArray)
        #expect(users.map(\.line) == [2, 3, 4])
        #expect(users.map(\.oversized) == [false, true, false])
        #expect(try JSONValue.parse(users[2].bytes).object?["localId"]?.string == "u3")
    }

    /// A Firebase export cut off, inside a user or between two: the users before the cut are
    /// read, then the reader names the byte where the file ends (issue 39 F17 (c)).
    @Test func aTruncatedFirebaseExportNamesTheByteWhereItEnds() throws {
        let whole = "{\"users\": [\n{\"localId\": \"u1\"},\n{\"localId\": \"u2\", \"providerUserInfo\": [{\"rawId\": \"1\"}]}\n]}\n"
        for (cut, userLine) in [(whole.count - 20, Optional(3)), (whole.count - 4, nil)] {
            let text = String(whole.prefix(cut))
            let path = try Self.write(text)
            defer { try? FileManager.default.removeItem(atPath: path) }
            var reader = try ImportFileReader(path: path, layout: .usersArray)
            defer { reader.close() }
            var ids: [String?] = []
            do {
                while let user = try reader.next() { ids.append(try JSONValue.parse(user.bytes).object?["localId"]?.string) }
                Issue.record("no failure at \(cut)")
            } catch let failure as ImportFileReader.Failure {
                #expect(failure.offset == Int64(text.utf8.count))
                #expect(failure == .truncated(line: 3, offset: Int64(text.utf8.count), userLine: userLine))
                #expect(failure.description.contains("byte \(text.utf8.count)") && failure.description.contains("cut off"), "\(failure)")
            }
            #expect(ids == (userLine == nil ? ["u1", "u2"] : ["u1"]), "\(cut)")
        }
    }
}

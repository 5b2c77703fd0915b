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
        for n in 0..<count { text += (n == 0 ? "" : ",\n") + "{\"localId\": \"user-\(n)\", \"pad\": \"\(String(repeating: "x", count: 100))\"}" }
        text += "\n]}\n"
        let path = try Self.write(text)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let users = try Self.readAll(path, .usersArray)
        #expect(users.count == count)
        #expect(users.last?.line == count + 1)
        #expect(try JSONValue.parse(try #require(users.last).bytes).object?["localId"]?.string == "user-\(count - 1)")
    }
}

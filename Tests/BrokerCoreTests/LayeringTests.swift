import Foundation
import Testing

/// The layers' rules, read from the sources (docs/architecture.md, decision 0037): a module built
/// for another target can be imported by accident on Linux, so the rules are checked here too.
@Suite struct LayeringTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func sources(_ target: String) throws -> [(path: String, text: String)] {
        let folder = root.appendingPathComponent("Sources/\(target)")
        let paths = try FileManager.default.subpathsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".swift") }
        return try paths.sorted().map { ($0, try String(contentsOf: folder.appendingPathComponent($0), encoding: .utf8)) }
    }

    /// Lines of code (not comments) of `text`.
    static func code(_ text: String) -> [Substring] {
        text.split(separator: "\n").filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("//") }
    }

    @Test func theApplicationLayerImportsNoHTTP() throws {
        let http = [
            "Hummingbird", "HummingbirdCore", "HTTPTypes", "NIOHTTP1", "NIOHTTPTypes", "NIOHTTPTypesHTTP1", "OpenAPIRuntime", "BrokerAPI",
            "BrokerServer",
        ]
        let files = try Self.sources("BrokerApplication")
        #expect(files.count > 20)
        for (path, text) in files {
            for line in Self.code(text) where line.hasPrefix("import ") || line.contains(" import ") {
                let module = line.split(separator: " ").last.map(String.init) ?? ""
                #expect(!http.contains(module), "\(path): \(line)")
            }
            #expect(!text.contains("RequestInfo"), "\(path) reads the HTTP edge's task-local")
        }
    }

    @Test func theDomainAndStorageHoldNoCLIWordingAndNoHTTPStatus() throws {
        for target in ["BrokerCore", "Storage"] {
            for (path, text) in try Self.sources(target) {
                for line in Self.code(text) {
                    #expect(!line.contains("hint: \""), "\(target)/\(path): \(line)")
                    #expect(!line.contains("'broker "), "\(target)/\(path): \(line)")
                    for status in ["badRequest", "unauthorized", "forbidden", "internalServerError", "serviceUnavailable", "httpStatus"] {
                        #expect(!line.contains(".\(status)"), "\(target)/\(path): \(line)")
                    }
                }
            }
        }
    }
}

import BrokerApplication
import Foundation
import Testing

/// docs/configuration.md's tables are generated from `BrokerConfiguration.settings`, and that
/// list holds every variable the code reads (issue 41 §2: one source for configuration).
@Suite struct ConfigurationDocsTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let document = root.appendingPathComponent("docs/configuration.md")
    static let begin = "<!-- BEGIN GENERATED from BrokerConfiguration.settings: do not edit; regenerate as said above -->\n"
    static let end = "<!-- END GENERATED -->\n"
    static let rewrite = "BROKER_UPDATE_DOCS=1 scripts/test.sh --filter ConfigurationDocsTests"
    /// The file that holds the list: its names are not the code reading them.
    static let listFile = "BrokerApplication/BrokerConfiguration+Settings.swift"

    /// The generated block, between its marker lines: a blank line, the tables, a blank line.
    static var generated: String { "\n" + Setting.markdownTables(BrokerConfiguration.settings) + "\n" }

    /// The tables between the markers are what the list renders to. With `BROKER_UPDATE_DOCS=1`
    /// the test writes them there instead of failing.
    @Test func theDocumentsTablesAreGeneratedFromTheSettings() throws {
        let text = try String(contentsOf: Self.document, encoding: .utf8)
        let begin = try #require(text.range(of: Self.begin), "docs/configuration.md lacks the line \(Self.begin)")
        let end = try #require(
            text.range(of: Self.end, range: begin.upperBound..<text.endIndex), "docs/configuration.md lacks the line \(Self.end)")
        #expect(text.components(separatedBy: Self.begin).count == 2 && text.components(separatedBy: Self.end).count == 2, "one block")
        let current = String(text[begin.upperBound..<end.lowerBound])
        let expected = Self.generated
        guard current != expected else { return }
        if ProcessInfo.processInfo.environment["BROKER_UPDATE_DOCS"] == "1" {
            let rewritten = String(text[..<begin.upperBound]) + expected + String(text[end.lowerBound...])
            try rewritten.write(to: Self.document, atomically: true, encoding: .utf8)
            return
        }
        let currentLines = current.split(separator: "\n", omittingEmptySubsequences: false)
        let expectedLines = expected.split(separator: "\n", omittingEmptySubsequences: false)
        let line =
            zip(currentLines, expectedLines).enumerated().first { $0.element.0 != $0.element.1 }?.offset
            ?? min(currentLines.count, expectedLines.count)
        let row = text[..<begin.upperBound].split(separator: "\n", omittingEmptySubsequences: false).count + line
        Issue.record(
            """
            docs/configuration.md's generated tables differ from BrokerConfiguration.settings, first at its line \(row):
              in the document: \(line < currentLines.count ? currentLines[line] : "(end of block)")
              from the list:   \(line < expectedLines.count ? expectedLines[line] : "(end of block)")
            Change the setting in Sources/\(Self.listFile), not the document, and rewrite the tables with: \(Self.rewrite)
            """)
    }

    /// String literals `"NAME"` of the sources outside the list that look like a variable the
    /// broker reads: `BROKER_*`, `OTEL_*`, `DATABASE_URL`, `NOTIFY_SOCKET`.
    static func namesReadInSources() throws -> Set<String> {
        let sources = root.appendingPathComponent("Sources")
        let paths = try FileManager.default.subpathsOfDirectory(atPath: sources.path).filter { $0.hasSuffix(".swift") && $0 != listFile }
        var names: Set<String> = []
        for path in paths {
            let text = try String(contentsOf: sources.appendingPathComponent(path), encoding: .utf8)
            for literal in quotedWords(text)
            where literal.hasPrefix("BROKER_") || literal.hasPrefix("OTEL_") || ["DATABASE_URL", "NOTIFY_SOCKET"].contains(literal) {
                names.insert(literal)
            }
        }
        return names
    }

    /// Every `"WORD"` of `text` whose word is made of capitals, digits and `_`.
    static func quotedWords(_ text: String) -> [String] {
        var words: [String] = []
        var word: String?
        for character in text {
            if character == "\"" {
                if let found = word, !found.isEmpty { words.append(found) }
                word = ""
            } else if word != nil, character.isASCII, character == "_" || character.isNumber || character.isUppercase {
                word?.append(character)
            } else {
                word = nil
            }
        }
        return words
    }

    /// Each variable the code reads is a setting (an `OTEL_*` variable may instead be named in a
    /// setting's meaning, as the traces-only ones are), and each setting is read somewhere.
    @Test func theSettingsAreTheVariablesTheCodeReads() throws {
        let read = try Self.namesReadInSources()
        #expect(read.contains("BROKER_PORT") && read.contains("DATABASE_URL") && read.contains("NOTIFY_SOCKET"), "the scan finds names")
        let settings = BrokerConfiguration.settings
        let names = Set(settings.map(\.name))
        #expect(names.count == settings.count, "no name twice")
        for name in read.sorted() where !names.contains(name) {
            let named = name.hasPrefix("OTEL_") && settings.contains { $0.meaning.contains("`\(name)`") }
            #expect(named, "\(name) is read in Sources/ but is not in BrokerConfiguration.settings (Sources/\(Self.listFile))")
        }
        for setting in settings where !setting.isFamily {
            #expect(read.contains(setting.name), "\(setting.name) is a setting but nothing in Sources/ reads \"\(setting.name)\"")
        }
        #expect(settings.filter(\.isFamily).map(\.name) == ["OTEL_*"])
    }

    /// The list is in the document's section order, so that each section's rows stay together.
    @Test func theSettingsAreListedSectionBySection() {
        let sections = BrokerConfiguration.settings.map(\.section)
        let order = sections.reduce(into: [Setting.Section]()) { if $0.last != $1 { $0.append($1) } }
        #expect(order == Setting.Section.allCases)
    }
}

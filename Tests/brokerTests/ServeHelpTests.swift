import BrokerApplication
import Foundation
import Testing
import TestSupport

/// `broker serve --help` prints every setting of BrokerConfiguration.settings, the list
/// docs/configuration.md is generated from (issue 41 §2). It cut names to 22 characters before:
/// `BROKER_HTTP_MAX_CONNECTIONS_PER_IP` came out cut.
@Suite struct ServeHelpTests {
    @Test func serveHelpPrintsEverySettingWholeWithItsMeaning() throws {
        let result = try BrokerCLI(databaseURL: nil).run("serve", "--help")
        #expect(result.status == 0)
        let lines = result.output.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        // Whitespace aside: the help wraps meanings, and breaks a long URL after a `|`.
        let text = result.output.filter { !$0.isWhitespace }
        for setting in BrokerConfiguration.settings {
            #expect(lines.contains(setting.plainName), "serve --help has no line naming \(setting.plainName) whole")
            let meaning = Setting.plainText(setting.meaning)
            #expect(text.contains(meaning.filter { !$0.isWhitespace }), "serve --help lacks the meaning of \(setting.name): \(meaning)")
        }
        #expect(lines.contains("BROKER_HTTP_MAX_CONNECTIONS_PER_IP"))
        #expect(!result.output.contains("](") && !result.output.contains("`"), "plain text, no Markdown")
    }
}

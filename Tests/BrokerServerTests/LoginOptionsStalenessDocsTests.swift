import Foundation
import Testing

@testable import BrokerApplication
@testable import BrokerServer

/// The API guide and the operator guide say the same about how stale `GET /v1/login-options`
/// can be, and it is what the code does (issue 20 §9: the README and the operator guide
/// disagreed; the README's API walk-through has since moved to docs/api-guide.md).
@Suite struct LoginOptionsStalenessDocsTests {
    static func document(_ path: String) throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
            .replacingOccurrences(of: "\n", with: " ")
    }

    @Test func theAPIGuideAndTheOperatorGuideStateTheCodesBounds() throws {
        let server = LoginCatalogStore.ttlSeconds
        let client = LoginOptionsRoute.clientCacheSeconds
        let statement = [
            "lives at most \(server) s if that notice is lost",
            "`Cache-Control: private, max-age=\(client)`",
            "up to \(client) s old, and up to \(server + client) s in the worst case",
        ]
        for path in ["docs/api-guide.md", "docs/operator-guide.md"] {
            let text = try Self.document(path)
            for part in statement { #expect(text.contains(part), "\(path) lacks: \(part)") }
        }
    }
}

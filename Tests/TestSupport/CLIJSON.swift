import Foundation

extension BrokerCLI.Result {
    /// The JSON printed on stdout (the CLI logs to stderr, interleaved in `output`: take the
    /// JSON document, which starts at the first line opening with `{` or `[`).
    public func json() throws -> Any {
        let lines = output.split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(where: { $0.hasPrefix("{") || $0.hasPrefix("[") }) else {
            throw CocoaError(.coderReadCorrupt, userInfo: [NSDebugDescriptionErrorKey: output])
        }
        return try JSONSerialization.jsonObject(with: Data(lines[start...].joined(separator: "\n").utf8))
    }

    public func object() throws -> [String: Any] { try json() as? [String: Any] ?? [:] }
    public func array() throws -> [[String: Any]] { try json() as? [[String: Any]] ?? [] }
}

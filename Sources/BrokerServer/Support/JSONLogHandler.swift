import Foundation
import Logging

/// One JSON object per line on stderr: `ts`, `level`, `label`, `msg` and the metadata.
/// Callers never put tokens or full emails in metadata; see ``Redact``.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    let label: String

    public init(label: String) { self.label = label }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var object: [String: String] = [
            "ts": Date().formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true)),
            "level": event.level.rawValue, "label": label, "msg": event.message.description,
        ]
        for (key, value) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 }) {
            object[key] = value.description
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard var line = try? encoder.encode(object) else { return }
        line.append(0x0A)
        FileHandle.standardError.write(line)
    }
}

/// Redaction helpers for logs: never a token, never a full email.
public enum Redact {
    /// `j***@example.com`
    public static func email(_ email: String) -> String {
        guard let at = email.firstIndex(of: "@"), at > email.startIndex else { return "***" }
        return "\(email[email.startIndex])***\(email[at...])"
    }
}

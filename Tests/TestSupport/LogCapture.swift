import Logging
import Synchronization

/// A logger whose lines a test reads back.
public final class LogCapture: Sendable {
    public struct Line: Sendable {
        public let level: Logger.Level
        public let message: String
        public let metadata: Logger.Metadata
    }

    private let stored = Mutex<[Line]>([])

    public init() {}

    public var lines: [Line] { stored.withLock { $0 } }

    public var logger: Logger {
        Logger(label: "capture") { _ in Handler(capture: self) }
    }

    fileprivate func append(_ line: Line) { stored.withLock { $0.append(line) } }

    private struct Handler: LogHandler {
        let capture: LogCapture
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            capture.append(
                Line(level: event.level, message: event.message.description, metadata: metadata.merging(event.metadata ?? [:]) { $1 }))
        }
    }
}

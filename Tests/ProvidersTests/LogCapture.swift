import Logging
import Synchronization

/// A logger whose lines a test reads back.
final class LogCapture: Sendable {
    struct Line: Sendable {
        let level: Logger.Level
        let message: String
        let metadata: Logger.Metadata
    }

    private let stored = Mutex<[Line]>([])

    var lines: [Line] { stored.withLock { $0 } }

    var logger: Logger {
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

/// A clock a test moves by hand.
final class ManualClock: Sendable {
    private let start = ContinuousClock.now
    private let offset = Mutex(Duration.zero)

    var now: ContinuousClock.Instant { start + offset.withLock { $0 } }

    func advance(by duration: Duration) { offset.withLock { $0 += duration } }
}

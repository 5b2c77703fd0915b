import Dispatch
import Foundation
import Logging

/// SIGTERM or SIGINT ends `broker serve` within `seconds`, whatever the database does
/// (decision 0015): graceful shutdown (the HTTP server drains, requests are answered by their
/// deadline, the pool closes) gets that long, then the process exits.
enum ShutdownDeadline {
    /// Keeps the signal sources alive for the life of the process.
    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []

    static func arm(seconds: Int, logger: Logger) {
        for signalNumber in [SIGTERM, SIGINT] {
            // As ServiceLifecycle does: the signal is delivered to dispatch sources only.
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler {
                DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(seconds)) {
                    logger.error("graceful shutdown did not finish in time; exiting", metadata: ["seconds": "\(seconds)"])
                    exit(1)
                }
            }
            source.resume()
            sources.append(source)
        }
    }
}

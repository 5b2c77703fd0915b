import Dispatch
import Foundation
import Logging

/// SIGTERM or SIGINT ends `broker serve` (or an import) within `seconds`, whatever the database
/// does (decision 0015): graceful shutdown (the HTTP server drains, requests are answered by
/// their deadline, the workers finish and record their calls in flight, the pool closes; an
/// import commits its batch in flight) gets that long, then the process exits.
enum ShutdownDeadline {
    /// Keeps the signal sources alive for the life of the process.
    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []

    /// `onSignal`: what the command does at the signal besides (an import stops after its batch
    /// in flight; `serve` has ServiceLifecycle's own handler).
    static func arm(seconds: Int, logger: Logger, onSignal: @escaping @Sendable () -> Void = {}) {
        for signalNumber in [SIGTERM, SIGINT] {
            // As ServiceLifecycle does: the signal is delivered to dispatch sources only.
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler {
                onSignal()
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

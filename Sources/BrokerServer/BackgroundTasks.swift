import BrokerApplication
import BrokerCore
import Logging
import ServiceLifecycle
import Storage

/// Runs ``BrokerServices/backgroundTasks(stop:)`` alongside the HTTP server until shutdown. At
/// graceful shutdown the workers take nothing new and get `drain` to finish the calls in flight
/// and record them (issue 39 D11); what is still in flight then is cancelled and gives its lease
/// back. `drain` stays within `broker serve`'s 14 s shutdown deadline, with time left for those
/// writes.
public struct BackgroundTasks: Service {
    let services: BrokerServices
    let drain: Duration

    /// 10 s: a provider's or a webhook's call is bounded by its own 10 s timeout by default.
    public static let defaultDrain: Duration = .seconds(10)

    public init(services: BrokerServices, drain: Duration = Self.defaultDrain) {
        self.services = services
        self.drain = drain
    }

    public func run() async throws {
        let stop = GracefulStop()
        let (services, drain) = (services, drain)
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await services.backgroundTasks(stop: stop) }
                group.addTask {
                    await stop.wait()
                    guard !Task.isCancelled else { return }
                    services.database.logger.notice(
                        "stopping: the workers take no new work; calls in flight get the drain time to finish and be recorded",
                        metadata: ["drain_seconds": "\(drain.components.seconds)"])
                    try? await Task.sleep(for: drain)
                }
                // The workers returned (all calls recorded), or the drain ran out (cancelled).
                await group.next()
                group.cancelAll()
            }
        } onGracefulShutdown: {
            stop.request()
        }
    }
}

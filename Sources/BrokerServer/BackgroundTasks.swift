import BrokerApplication
import ServiceLifecycle

/// Runs ``BrokerServices/backgroundTasks()`` alongside the HTTP server until shutdown.
public struct BackgroundTasks: Service {
    let services: BrokerServices

    public init(services: BrokerServices) { self.services = services }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            await services.backgroundTasks()
        }
    }
}

import Synchronization

/// Whether this instance is stopping (`BROKER_DRAIN_SECONDS`, issue 43): from the first SIGTERM
/// or SIGINT, `/readyz` answers 503 `shutting_down` so a load balancer takes the instance out,
/// and every answer carries `Connection: close` so a client's next request opens a connection
/// to another instance, while requests are still served for the drain period; then the server
/// stops accepting and finishes what is in flight.
public final class Drain: Sendable {
    private let draining = Atomic(false)

    public init() {}

    public var isDraining: Bool { draining.load(ordering: .relaxed) }

    /// Starts the drain (once; later calls change nothing).
    public func begin() { draining.store(true, ordering: .relaxed) }
}

import Metrics
import Prometheus
import Synchronization

/// The process's Prometheus registry. swift-metrics is bootstrapped with it once per process
/// (RequestMetricsMiddleware and libraries record through swift-metrics), and
/// `/metrics` renders it.
public enum BrokerMetrics {
    public static let registry = PrometheusCollectorRegistry()
    private static let bootstrapped = Mutex(false)

    /// Idempotent: tests build many applications in one process.
    public static func bootstrap() {
        bootstrapped.withLock { done in
            guard !done else { return }
            done = true
            var factory = PrometheusMetricsFactory(registry: registry)
            factory.defaultDurationHistogramBuckets = [
                .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(20),
                .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
                .seconds(2), .seconds(5),
            ]
            MetricsSystem.bootstrap(factory)
        }
    }

    public static func render() -> String { registry.emitToString() }
}

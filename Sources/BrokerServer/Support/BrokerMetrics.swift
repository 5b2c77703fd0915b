import Metrics
import Prometheus
import Providers
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

    /// Serializes scrapes: each one renders the key set states it recorded.
    private static let scrape = Mutex(())
    /// `broker_provider_keys_usable`.
    private static var keysUsable: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "broker", subsystem: "provider", metricName: "keys", unitName: "usable",
            helpText: "1 while a usable signing key set of the provider (built-in type or OpenID Connect issuer) is cached, else 0.")
    }

    /// The text of `/metrics`, with `broker_provider_keys_usable{provider="<key>"}` set from
    /// `keySets` just before: 1 while a usable key set is cached, else 0 (unavailable or
    /// unused), for every key set `/readyz` lists.
    static func render(keySets: [String: ProviderKeySets.State]) -> String {
        scrape.withLock { _ in
            for (key, state) in keySets {
                registry.makeGauge(descriptor: keysUsable, labels: [("provider", key)]).set(state == .usable ? 1.0 : 0.0)
            }
            return registry.emitToString()
        }
    }
}

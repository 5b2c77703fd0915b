import Metrics

/// `broker_rate_limited_total{limit="api_key|public_ip|failed_authentication"}`: requests
/// answered 429 (decision 0048); `broker_connections_refused_total{reason="per_address"}`:
/// connections closed as accepted because their address held its cap.
enum RateLimitMetrics {
    private static let limits = ["api_key", "public_ip", "failed_authentication"]
    private static let counters: [String: Counter] = Dictionary(
        uniqueKeysWithValues: limits.map { ($0, Counter(label: "broker_rate_limited_total", dimensions: [("limit", $0)])) })
    private static let connectionsRefused = Counter(label: "broker_connections_refused_total", dimensions: [("reason", "per_address")])

    static func refused(_ limit: String) {
        (counters[limit] ?? counters["api_key"])?.increment()
    }

    static func connectionRefused() { connectionsRefused.increment() }
}

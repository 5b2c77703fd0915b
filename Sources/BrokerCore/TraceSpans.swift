import Synchronization

/// Whether this process makes trace spans: on once `broker serve` has started exporting traces
/// (`OTEL_EXPORTER_OTLP_ENDPOINT` set), off otherwise, so a broker that exports nothing does no
/// span work on its request paths (decision 0053).
public enum TraceSpans {
    private static let on = Atomic<Bool>(false)

    public static var enabled: Bool { on.load(ordering: .relaxed) }

    /// Query parameters a server span records as `REDACTED`: the OpenID Connect callback's
    /// code and state, the import lookup's external id, and any token someone sends there.
    public static let redactedQueryParameters: Set<String> = [
        "code", "state", "error_description", "external_id", "id_token", "access_token", "refresh_token", "token",
    ]

    /// Called once, after the process's tracer is in place and before requests are served.
    public static func enable() { on.store(true, ordering: .relaxed) }
}

import BrokerCore
import Foundation
import Logging
import OTel
import ServiceLifecycle
import Tracing

/// OpenTelemetry traces of `broker serve` (decision 0053): off unless
/// `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set; then spans of
/// every request, statement and outbound call go over OTLP/HTTP to `<endpoint>/v1/traces`
/// (protobuf, or JSON with `OTEL_EXPORTER_OTLP_PROTOCOL=http/json`), in batches, by a service
/// that runs beside the server and sends what is left when it stops. The other `OTEL_*`
/// variables of the OpenTelemetry specification apply (`OTEL_SERVICE_NAME`,
/// `OTEL_TRACES_SAMPLER`, `OTEL_BSP_SCHEDULE_DELAY`, headers, timeout). No logs or metrics go
/// this way: logs stay on standard output and metrics on `/metrics`.
enum TraceExport {
    static let endpointVariables = ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]

    /// The exporting service to run beside the server, with the process's tracer in place;
    /// nil when no endpoint is set.
    static func start(environment: [String: String], logger: Logger) throws -> (any Service)? {
        guard endpointVariables.contains(where: { !(environment[$0] ?? "").isEmpty }) else { return nil }
        if let chosen = environment["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] ?? environment["OTEL_EXPORTER_OTLP_PROTOCOL"],
            !["http/protobuf", "http/json"].contains(chosen)
        {
            throw BrokerError.invalidArgument(
                "OTEL_EXPORTER_OTLP_PROTOCOL is '\(chosen)', and the broker sends traces over HTTP only.",
                hint:
                    "Set OTEL_EXPORTER_OTLP_PROTOCOL to http/protobuf (the default) or http/json, with the collector's OTLP/HTTP address (port 4318) in OTEL_EXPORTER_OTLP_ENDPOINT."
            )
        }
        var configuration = OTel.Configuration.default
        configuration.serviceName = "identity-broker"
        configuration.diagnosticLogger = .custom(logger)
        configuration.diagnosticLogLevel = .warning
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.traces.enabled = true
        let backend = try explained { try OTel.makeTracingBackend(configuration: configuration) }
        InstrumentationSystem.bootstrap(backend.factory)
        TraceSpans.enable()
        logger.info("exporting traces over OTLP/HTTP")
        return backend.service
    }

    /// `make()`, its error said as what to check.
    private static func explained<T>(_ make: () throws -> T) throws -> T {
        do {
            return try make()
        } catch {
            throw BrokerError.invalidArgument(
                "The OpenTelemetry settings cannot be used: \(error).",
                hint:
                    "Check the OTEL_* variables (OTEL_EXPORTER_OTLP_ENDPOINT is the collector's OTLP/HTTP address, e.g. http://127.0.0.1:4318), or unset OTEL_EXPORTER_OTLP_ENDPOINT to run without traces."
            )
        }
    }
}

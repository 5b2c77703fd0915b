import Foundation
import HTTPTypes
import Hummingbird
import Synchronization

/// An OpenTelemetry collector's OTLP/HTTP receiver on 127.0.0.1 (a free port) for the duration
/// of `body`: it takes `POST /v1/traces` in OTLP's JSON encoding (`OTEL_EXPORTER_OTLP_PROTOCOL
/// =http/json`) and keeps every span it was sent.
public final class TraceCollector: Sendable {
    public struct Span: Sendable, CustomStringConvertible {
        public let traceID: String
        public let spanID: String
        /// Empty for a trace's root span.
        public let parentSpanID: String
        public let name: String
        /// OTLP's kind, e.g. `SPAN_KIND_SERVER` (or its number).
        public let kind: String
        /// Each attribute's value as text.
        public let attributes: [String: String]
        public let serviceName: String

        public var description: String { "\(name) [\(kind)] \(attributes)" }
    }

    private struct State {
        var spans: [Span] = []
        var contentTypes: Set<String> = []
        var watchers: [(ready: @Sendable ([Span]) -> Bool, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Mutex(State())
    /// What `OTEL_EXPORTER_OTLP_ENDPOINT` is set to.
    public let endpoint: String

    private init(endpoint: String) { self.endpoint = endpoint }

    public var spans: [Span] { state.withLock { $0.spans } }
    /// The content types the exports came with.
    public var contentTypes: Set<String> { state.withLock { $0.contentTypes } }

    /// Returns the spans received once they satisfy `ready`: checked on each export, no timer
    /// (a test that waits here bounds itself with a time limit).
    public func spans(until ready: @escaping @Sendable ([Span]) -> Bool) async -> [Span] {
        await withCheckedContinuation { continuation in
            let done = state.withLock { state -> Bool in
                if ready(state.spans) { return true }
                state.watchers.append((ready, continuation))
                return false
            }
            if done { continuation.resume() }
        }
        return spans
    }

    private func received(_ spans: [Span], contentType: String) {
        let woken = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.spans += spans
            state.contentTypes.insert(contentType)
            let all = state.spans
            let ready = state.watchers.filter { $0.ready(all) }.map(\.continuation)
            state.watchers.removeAll { $0.ready(all) }
            return ready
        }
        for continuation in woken { continuation.resume() }
    }

    /// The spans of one OTLP/JSON export request.
    static func parse(_ body: Data) -> [Span] {
        guard let root = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] else { return [] }
        var spans: [Span] = []
        for resourceSpans in root["resourceSpans"] as? [[String: Any]] ?? [] {
            let resource = attributes((resourceSpans["resource"] as? [String: Any])?["attributes"])
            for scopeSpans in resourceSpans["scopeSpans"] as? [[String: Any]] ?? [] {
                for span in scopeSpans["spans"] as? [[String: Any]] ?? [] {
                    spans.append(
                        Span(
                            traceID: span["traceId"] as? String ?? "", spanID: span["spanId"] as? String ?? "",
                            parentSpanID: span["parentSpanId"] as? String ?? "", name: span["name"] as? String ?? "",
                            kind: span["kind"].map { "\($0)" } ?? "", attributes: attributes(span["attributes"]),
                            serviceName: resource["service.name"] ?? ""))
                }
            }
        }
        return spans
    }

    private static func attributes(_ list: Any?) -> [String: String] {
        var result: [String: String] = [:]
        for attribute in list as? [[String: Any]] ?? [] {
            guard let key = attribute["key"] as? String, let value = attribute["value"] as? [String: Any],
                let first = value.values.first
            else { continue }
            result[key] = "\(first)"
        }
        return result
    }

    public static func with<T: Sendable>(_ body: @Sendable (TraceCollector) async throws -> T) async throws -> T {
        let box = Mutex<TraceCollector?>(nil)
        let router = Router()
        router.post("/v1/traces") { request, _ -> Response in
            let body = try await request.body.collect(upTo: 16 << 20)
            box.withLock { $0 }?.received(parse(Data(body.readableBytesView)), contentType: request.headers[.contentType] ?? "")
            var headers = HTTPFields()
            headers[.contentType] = "application/json"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: .init(string: "{}")))
        }
        return try await LoopbackServer.with(router) { port in
            let collector = TraceCollector(endpoint: "http://127.0.0.1:\(port)")
            box.withLock { $0 = collector }
            return try await body(collector)
        }
    }
}

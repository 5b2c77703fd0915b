import Foundation
import HTTPTypes
import Hummingbird
import Synchronization

/// A product backend's webhook endpoint on 127.0.0.1 (a free port) for the duration of `body`:
/// it records every delivery (headers and body) and answers as told: 204 by default, a status
/// of the test's choosing, or no answer at all (hang).
public final class WebhookSink: Sendable {
    public struct Delivery: Sendable {
        public let id: String
        public let timestamp: String
        public let signature: String
        public let contentType: String
        public let body: String
        /// What the sink answered.
        public let status: Int

        public init(id: String, timestamp: String, signature: String, contentType: String, body: String, status: Int) {
            self.id = id
            self.timestamp = timestamp
            self.signature = signature
            self.contentType = contentType
            self.body = body
            self.status = status
        }

        public var json: [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:]
        }
    }

    public enum Answer: Sendable {
        case status(Int)
        /// No answer until the sink closes.
        case hang
        /// Held until ``releaseHeld()``, then answered with this status.
        case held(then: Int)
    }

    private struct State {
        var deliveries: [Delivery] = []
        var answer: Answer = .status(204)
        /// Requests held by `.hang`, let go when the sink closes.
        var held: [CheckedContinuation<Void, Never>] = []
        /// Requests held by `.held(then:)`, let go by `releaseHeld()` (or when the sink closes).
        var gated: [CheckedContinuation<Void, Never>] = []
        /// Waiting for a number of deliveries.
        var watchers: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
        var closed = false
    }

    private let state = Mutex(State())
    public let url: String

    private init(url: String) { self.url = url }

    /// Every delivery received, first first (answered or not).
    public var deliveries: [Delivery] { state.withLock { $0.deliveries } }

    /// How the sink answers from now on.
    public func answer(_ answer: Answer) { state.withLock { $0.answer = answer } }

    /// Answers the requests `.held(then:)` holds with its status, and the next ones at once.
    public func releaseHeld() {
        let gated = state.withLock { state in
            if case .held(let status) = state.answer { state.answer = .status(status) }
            defer { state.gated = [] }
            return state.gated
        }
        for continuation in gated { continuation.resume() }
    }

    /// Returns once `count` deliveries have arrived (an event, no polling).
    public func waitForDeliveries(_ count: Int) async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Bool in
                if state.deliveries.count >= count { return true }
                state.watchers.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    public static func with<T: Sendable>(path: String = "/hooks/identity", _ body: @Sendable (WebhookSink) async throws -> T) async throws
        -> T
    {
        let box = Mutex<WebhookSink?>(nil)
        let router = Router()
        router.post(RouterPath(path)) { request, _ -> Response in
            let sink = box.withLock { $0 }
            let text = String(buffer: try await request.body.collect(upTo: 1 << 20))
            let answer = sink?.state.withLock { $0.answer } ?? .status(204)
            let code: Int
            switch answer {
            case .status(let status), .held(let status): code = status
            case .hang: code = 0
            }
            let woken =
                sink?.state.withLock { state -> [CheckedContinuation<Void, Never>] in
                    state.deliveries.append(
                        Delivery(
                            id: request.headers[HTTPField.Name("webhook-id")!] ?? "",
                            timestamp: request.headers[HTTPField.Name("webhook-timestamp")!] ?? "",
                            signature: request.headers[HTTPField.Name("webhook-signature")!] ?? "",
                            contentType: request.headers[.contentType] ?? "", body: text, status: code))
                    let count = state.deliveries.count
                    defer { state.watchers.removeAll { $0.count <= count } }
                    return state.watchers.filter { $0.count <= count }.map(\.continuation)
                } ?? []
            for watcher in woken { watcher.resume() }
            if case .held = answer {
                await withCheckedContinuation { continuation in
                    let open =
                        sink?.state.withLock { state -> Bool in
                            guard !state.closed, case .held = state.answer else { return true }
                            state.gated.append(continuation)
                            return false
                        } ?? true
                    if open { continuation.resume() }
                }
            }
            if case .hang = answer {
                // Held until the sink closes: the worker gives up first, by its own deadline.
                await withCheckedContinuation { continuation in
                    let closed =
                        sink?.state.withLock { state -> Bool in
                            if !state.closed { state.held.append(continuation) }
                            return state.closed
                        } ?? true
                    if closed { continuation.resume() }
                }
                return Response(status: .serviceUnavailable)
            }
            return Response(status: HTTPResponse.Status(code: code))
        }
        return try await LoopbackServer.with(router) { port in
            let sink = WebhookSink(url: "http://127.0.0.1:\(port)\(path)")
            box.withLock { $0 = sink }
            defer {
                let held = sink.state.withLock { state in
                    state.closed = true
                    defer { (state.held, state.gated) = ([], []) }
                    return state.held + state.gated
                }
                for continuation in held { continuation.resume() }
            }
            return try await body(sink)
        }
    }
}

import AsyncHTTPClient
import BrokerCore
import NIOCore
import NIOHTTP1

/// A provider's whole answer, status and body, fetched within one time limit.
struct ProviderAnswer: Sendable {
    let status: UInt
    let body: ByteBuffer

    /// Sends `request` and collects the answer, at most `maxBytes` of body, all within
    /// `timeout`: connecting, the head and the whole body (AsyncHTTPClient's own deadline ends
    /// at the head, so a provider sending one byte a second would hold the caller for as long as
    /// it liked). Seen with AsyncHTTPClient 1.37.0: `execute(_:deadline:)` cancels its deadline
    /// timer once the head has arrived (`executeCancellable`'s `defer`). The outer deadline can
    /// go if a release bounds the body too and `ProviderSlowAnswerTests` pass without it
    /// (docs/upstream.md, "Other libraries"). Throws ``DeadlineExceeded`` when the time is up;
    /// the request is cancelled and its connection closed. Throws ``ProviderCircuitOpen`` at
    /// once, sending nothing, while the endpoint's circuit is open (``ProviderCircuits``,
    /// decision 0049); `circuits` nil: a call that paces itself (key sets are fetched in the
    /// background at their own rate).
    static func fetch(
        _ request: HTTPClientRequest, with client: HTTPClient, timeout: Duration, maxBytes: Int = 1 << 20,
        circuits: ProviderCircuits? = .shared
    ) async throws -> ProviderAnswer {
        let endpoint = ProviderCircuits.endpoint(of: request.url)
        if let circuits, !circuits.permit(endpoint) { throw ProviderCircuitOpen(endpoint: endpoint) }
        // Within the request's own deadline, less what it needs to answer the outage.
        let timeout = RequestBudget.bound(timeout)
        guard timeout > .zero else { throw DeadlineExceeded(timeout: timeout) }
        let headDeadline = NIODeadline.now() + timeAmount(timeout)
        do {
            let answer = try await OutboundSpan.around(request, status: { Int($0.status) }) {
                try await withDeadline(timeout) {
                    let response = try await client.execute(request, deadline: headDeadline)
                    let body = try await response.body.collect(upTo: maxBytes)
                    return ProviderAnswer(status: response.status.code, body: body)
                }
            }
            circuits?.record(endpoint, answer.status < 500 ? .answered : .failed)
            return answer
        } catch {
            circuits?.record(endpoint, Task.isCancelled ? .abandoned : .failed)
            throw error
        }
    }

    /// `duration` as NIO's time amount, clamped to a day (no overflow whatever it says).
    static func timeAmount(_ duration: Duration) -> TimeAmount {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return .zero }
        guard seconds < 86_400 else { return .seconds(86_400) }
        return .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    /// At most `maxScalars` Unicode scalars of a text a provider sent, for a message: bounded
    /// by scalars, not characters (one character can hold any number of combining marks).
    static func shown(_ text: String, _ maxScalars: Int) -> String {
        var scalars = String.UnicodeScalarView()
        scalars.append(contentsOf: text.unicodeScalars.prefix(maxScalars))
        return String(scalars)
    }
}

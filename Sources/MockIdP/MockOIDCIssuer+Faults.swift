import Foundation
import NIOCore
import Synchronization

/// Faults a ``MockOIDCIssuer`` can be told to show, so that tests see what the broker does when
/// an OpenID provider misbehaves: discovery or the key set down, never answering, or
/// discovery naming another issuer. Set them in process or through ``MockIdPServer/faultsPath``
/// (`oidc.<name>.discovery`, `oidc.<name>.keys`).
///
/// A hanging request gets no answer until the fault changes (then it is answered as the new
/// fault says), the request's task is cancelled, the connection or the server's listening
/// socket closes (a graceful shutdown closes it first, so a hang never holds the server up), or
/// ten minutes pass; in every case but the first the connection is closed without an answer.
extension MockOIDCIssuer {
    /// How the discovery document (every tenant's, multi-tenant) is answered.
    public enum DiscoveryFault: Sendable, Equatable {
        /// The document (no fault).
        case none
        /// 503 with no body, as when the provider is down.
        case unavailable
        /// No answer (see the extension's comment for when the request ends).
        case hang
        /// The document, but its `issuer` is ``MockOIDCIssuer/wrongIssuerBase`` followed by the
        /// issuer's path (`http://wrong-issuer.invalid/oidc/<name>`).
        case wrongIssuer
        /// 200 with a body that is not JSON.
        case malformed
        /// Exactly this answer.
        case answer(status: Int, body: Data)
    }

    /// How the key set endpoint is answered.
    public enum KeysFault: Sendable, Equatable {
        /// The published keys (no fault).
        case none
        /// 503 with no body, as when the provider is down.
        case unavailable
        /// No answer (see the extension's comment for when the request ends).
        case hang
        /// 200 with `{"keys": []}`.
        case emptySet
        /// 200 with a body that is not a key set.
        case malformed
        /// Exactly this answer.
        case answer(status: Int, body: Data)
    }

    /// The base of the `issuer` ``DiscoveryFault/wrongIssuer`` serves.
    public static let wrongIssuerBase = "http://wrong-issuer.invalid"
    /// How long a hang lasts at most.
    static let hangLimit = TimeAmount.minutes(10)

    public var discoveryFault: DiscoveryFault {
        get { state.withLock { $0.discoveryFault } }
        set { changeFaults { $0.discoveryFault = newValue } }
    }

    public var keysFault: KeysFault {
        get { state.withLock { $0.keysFault } }
        set { changeFaults { $0.keysFault = newValue } }
    }

    /// Requests received for a discovery document (a hanging request counts once).
    public var discoveryFetches: Int { state.withLock { $0.discoveryFetches } }

    /// Requests received for the key set (a hanging request counts once).
    public var keyFetches: Int { state.withLock { $0.keyFetches } }

    /// Requests hanging now (discovery and key set together).
    public var hangingRequests: Int { state.withLock { $0.hangs.count } }

    /// Returns once `count` requests in all have started hanging since the issuer was made
    /// (discovery and key set together): the event a test waits on before it lifts a fault or
    /// stops the server under a hanging request.
    public func waitUntilHanging(_ count: Int = 1) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state in
                guard state.hangsStarted < count else { return true }
                state.hangWaiters.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Applies a fault change and wakes every hanging request to re-check its fault.
    func changeFaults(_ change: (inout State) -> Void) {
        let hanging = state.withLock { state in
            change(&state)
            state.faultGeneration += 1
            return Array(state.hangs.values)
        }
        for release in hanging { release.resume(.faultChanged) }
    }

    /// What a route sends.
    enum Answer: Sendable, Equatable {
        case response(status: Int, body: Data)
        /// Hang: the fault was read at `generation` (``State/faultGeneration``).
        case hang(generation: Int)
    }

    /// The discovery document's answer at `base` for `tenant` (multi-tenant; nil: single-tenant).
    /// `count`: count the fetch (false when a hanging request re-checks).
    func discoveryAnswer(base: String, tenant: String?, count: Bool) throws -> Answer {
        let (fault, generation) = state.withLock { state in
            if count { state.discoveryFetches += 1 }
            return (state.discoveryFault, state.faultGeneration)
        }
        switch fault {
        case .none: return .response(status: 200, body: try discoveryDocument(base: base, tenant: tenant))
        case .unavailable: return .response(status: 503, body: Data())
        case .hang: return .hang(generation: generation)
        case .wrongIssuer: return .response(status: 200, body: try discoveryDocument(base: base, tenant: tenant, wrongIssuer: true))
        case .malformed: return .response(status: 200, body: Data(#"<html>maintenance</html>"#.utf8))
        case .answer(let status, let body): return .response(status: status, body: body)
        }
    }

    /// The key set endpoint's answer. `count`: count the fetch.
    func keysAnswer(count: Bool) throws -> Answer {
        let (fault, generation) = state.withLock { state in
            if count { state.keyFetches += 1 }
            return (state.keysFault, state.faultGeneration)
        }
        switch fault {
        case .none: return .response(status: 200, body: try jwksJSON())
        case .unavailable: return .response(status: 503, body: Data())
        case .hang: return .hang(generation: generation)
        case .emptySet: return .response(status: 200, body: Data(#"{"keys":[]}"#.utf8))
        case .malformed: return .response(status: 200, body: Data(#"<html>maintenance</html>"#.utf8))
        case .answer(let status, let body): return .response(status: status, body: body)
        }
    }

    /// How a hang ended.
    enum HangEnd: Sendable {
        /// A fault changed: answer as the faults now say.
        case faultChanged
        /// Cancelled, the connection or the server closed, or ``hangLimit`` passed: close the
        /// connection without an answer.
        case ended
    }

    /// Waits, without answering, for the first of: a fault change after `generation`, the
    /// task's cancellation, `channel` or its server channel closing, ``hangLimit``.
    func hang(on channel: any Channel, generation: Int) async -> HangEnd {
        let id = UUID()
        let end = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<HangEnd, Never>) in
                let release = HangRelease(continuation)
                let (changed, waiters) = state.withLock { state -> (Bool, [CheckedContinuation<Void, Never>]) in
                    guard state.faultGeneration == generation else { return (true, []) }
                    state.hangs[id] = release
                    state.hangsStarted += 1
                    let started = state.hangsStarted
                    let ready = state.hangWaiters.filter { $0.count <= started }.map(\.continuation)
                    state.hangWaiters.removeAll { $0.count <= started }
                    return (false, ready)
                }
                for waiter in waiters { waiter.resume() }
                guard !changed else { return release.resume(.faultChanged) }
                channel.closeFuture.whenComplete { _ in release.resume(.ended) }
                channel.parent?.closeFuture.whenComplete { _ in release.resume(.ended) }
                release.limit(channel.eventLoop.scheduleTask(in: Self.hangLimit) { release.resume(.ended) })
                // Cancelled before the release was registered: onCancel found nothing to resume.
                if Task.isCancelled { release.resume(.ended) }
            }
        } onCancel: {
            state.withLock { $0.hangs[id] }?.resume(.ended)
        }
        state.withLock { _ = $0.hangs.removeValue(forKey: id) }
        return end
    }
}

/// Resumes a hanging request once, whichever of its ends comes first, and then cancels its
/// time limit.
final class HangRelease: Sendable {
    private struct State {
        var continuation: CheckedContinuation<MockOIDCIssuer.HangEnd, Never>?
        var limit: Scheduled<Void>?
    }

    private let state: Mutex<State>

    init(_ continuation: CheckedContinuation<MockOIDCIssuer.HangEnd, Never>) {
        state = Mutex(State(continuation: continuation))
    }

    /// Sets the time limit's task (cancelled at once when the request already ended).
    func limit(_ scheduled: Scheduled<Void>) {
        let ended = state.withLock { state in
            state.limit = scheduled
            return state.continuation == nil
        }
        if ended { scheduled.cancel() }
    }

    func resume(_ end: MockOIDCIssuer.HangEnd) {
        let (continuation, limit) = state.withLock { state in
            defer { state.continuation = nil }
            return (state.continuation, state.limit)
        }
        guard let continuation else { return }
        continuation.resume(returning: end)
        limit?.cancel()
    }
}

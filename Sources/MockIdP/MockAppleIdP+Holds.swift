import Synchronization

/// Answers the mock holds back until the test lets them go, so that a test can act while the
/// broker is waiting on Apple (stop the database mid-call, say) without timing anything.
extension MockAppleIdP {
    public enum HeldEndpoint: Sendable, Hashable {
        /// `/auth/revoke`.
        case revoke
        /// `/auth/token` with `grant_type=refresh_token` (a credential-state check).
        case refreshGrant
        /// `/auth/token` with `grant_type=authorization_code` (a code redeemed).
        case codeGrant
    }

    /// From now on, requests to `endpoint` wait (before they are answered) until ``release(_:)``.
    public func hold(_ endpoint: HeldEndpoint) { holds.withLock { _ = $0.held.insert(endpoint) } }

    /// Lets every held request to `endpoint` go, and answers the next ones at once.
    public func release(_ endpoint: HeldEndpoint) {
        let waiting = holds.withLock { holds in
            holds.held.remove(endpoint)
            return holds.waiting.removeValue(forKey: endpoint) ?? []
        }
        for request in waiting { request.resume() }
    }

    /// Requests to `endpoint` that arrived so far (held or not).
    public func arrivals(_ endpoint: HeldEndpoint) -> Int { holds.withLock { $0.arrivals[endpoint, default: 0] } }

    /// Returns once `count` requests to `endpoint` have arrived (an event, no polling).
    public func waitForArrivals(_ endpoint: HeldEndpoint, count: Int) async {
        await withCheckedContinuation { continuation in
            let ready = holds.withLock { holds -> Bool in
                if holds.arrivals[endpoint, default: 0] >= count { return true }
                holds.watchers.append((endpoint, count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// A request to `endpoint` arrives: counted, and held while the endpoint is held.
    func pass(_ endpoint: HeldEndpoint) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let (held, woken) = holds.withLock { holds -> (Bool, [CheckedContinuation<Void, Never>]) in
                holds.arrivals[endpoint, default: 0] += 1
                let arrived = holds.arrivals[endpoint, default: 0]
                let woken = holds.watchers.filter { $0.endpoint == endpoint && $0.count <= arrived }.map(\.continuation)
                holds.watchers.removeAll { $0.endpoint == endpoint && $0.count <= arrived }
                guard holds.held.contains(endpoint) else { return (false, woken) }
                holds.waiting[endpoint, default: []].append(continuation)
                return (true, woken)
            }
            for watcher in woken { watcher.resume() }
            if !held { continuation.resume() }
        }
    }
}

struct MockHolds: Sendable {
    var held: Set<MockAppleIdP.HeldEndpoint> = []
    var arrivals: [MockAppleIdP.HeldEndpoint: Int] = [:]
    var waiting: [MockAppleIdP.HeldEndpoint: [CheckedContinuation<Void, Never>]] = [:]
    var watchers: [(endpoint: MockAppleIdP.HeldEndpoint, count: Int, continuation: CheckedContinuation<Void, Never>)] = []
}

import BrokerCore
import Logging
import Synchronization

/// Circuit breakers of the providers' endpoints (decision 0049), one per endpoint (scheme, host,
/// port and path; never the query, which may carry a token): after `failures` failures in a
/// row within `window` seconds (no answer in time, an unreachable host, a 5xx), the circuit
/// opens and calls to that endpoint fail at once, without a connection, for `openFor` seconds;
/// then one call goes through as a probe: an answer closes the circuit, a failure opens it for
/// another `openFor`. Other endpoints, Apple's keys beside Apple's token endpoint included, keep
/// their own circuits: one provider down never takes the others with it. In memory, per process.
public final class ProviderCircuits: Sendable {
    public struct Settings: Sendable {
        public var failures: Int
        public var window: Double
        public var openFor: Double

        public init(failures: Int = 5, window: Double = 10, openFor: Double = 10) {
            self.failures = failures
            self.window = window
            self.openFor = openFor
        }
    }

    /// What a finished call reports.
    public enum Outcome: Sendable {
        /// The endpoint answered (any status below 500).
        case answered
        /// No answer in time, no connection, or a 5xx.
        case failed
        /// The caller went away: says nothing about the endpoint.
        case abandoned
    }

    private enum State {
        case closed(failures: Int, since: Double)
        case open(since: Double, probing: Bool)
    }

    /// The breakers of every provider call this process makes.
    public static let shared = ProviderCircuits()

    public let settings: Settings
    public let now: @Sendable () -> Double
    private let states = Mutex<[String: State]>([:])
    private let logger = Logger(label: "identitybroker.providers.circuits")

    public init(settings: Settings = Settings(), now: @escaping @Sendable () -> Double = TokenBucketClock.monotonicSeconds) {
        self.settings = settings
        self.now = now
    }

    /// Whether a call to `endpoint` may go out now: false while its circuit is open (and its
    /// probe, if due, is taken by another call).
    public func permit(_ endpoint: String) -> Bool {
        let instant = now()
        return states.withLock { states in
            guard case .open(let since, let probing) = states[endpoint] else { return true }
            guard !probing, instant - since >= settings.openFor else { return false }
            states[endpoint] = .open(since: since, probing: true)
            return true
        }
    }

    /// Records how a permitted call to `endpoint` ended.
    public func record(_ endpoint: String, _ outcome: Outcome) {
        let instant = now()
        let opened: Bool = states.withLock { states in
            switch (states[endpoint], outcome) {
            case (.open(let since, _), .abandoned):
                states[endpoint] = .open(since: since, probing: false)
                return false
            case (_, .abandoned):
                return false
            case (_, .answered):
                states[endpoint] = nil
                return false
            case (.open, .failed):
                states[endpoint] = .open(since: instant, probing: false)
                return false
            case (.closed(let failures, let since), .failed) where instant - since <= settings.window:
                if failures + 1 >= settings.failures {
                    states[endpoint] = .open(since: instant, probing: false)
                    return true
                }
                states[endpoint] = .closed(failures: failures + 1, since: since)
                return false
            case (_, .failed):
                if states.count >= 10_000 { states.removeAll() }
                states[endpoint] = settings.failures <= 1 ? .open(since: instant, probing: false) : .closed(failures: 1, since: instant)
                return settings.failures <= 1
            }
        }
        if opened {
            logger.warning(
                "provider endpoint failing: calls to it fail at once until a probe succeeds",
                metadata: ["endpoint": "\(endpoint)", "probe_in_seconds": "\(Int(settings.openFor))"])
        }
    }

    /// Whether `endpoint`'s circuit is open now (tests, readiness detail).
    public func isOpen(_ endpoint: String) -> Bool {
        states.withLock { if case .open = $0[endpoint] { true } else { false } }
    }

    /// The circuit key of a URL: everything before its query or fragment.
    public static func endpoint(of url: String) -> String {
        String(url.prefix { $0 != "?" && $0 != "#" })
    }
}

/// A call refused because its endpoint's circuit is open.
public struct ProviderCircuitOpen: Error, Sendable {
    public let endpoint: String
}

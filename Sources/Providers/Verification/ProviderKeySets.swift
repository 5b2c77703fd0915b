import AsyncHTTPClient
import Logging
import Synchronization

/// The key sets of every provider the broker verifies tokens of, by key (built-in type name or
/// OpenID Connect issuer).
///
/// A key set is fetched at its first need (the first sign-in that looks a key up) and then
/// refreshed in the background by ``runBackground()``; a key set nobody needs is never fetched,
/// so an instance with no tenant, or whose tenants do not use a provider, never reaches that
/// provider. Its ``states()`` are reported by `/readyz` and as the
/// `broker_provider_keys_usable` metric; they never make the instance unready (decision 0036).
public final class ProviderKeySets: Sendable {
    /// What a key set can verify with.
    public enum State: String, Sendable {
        /// A usable key set is cached (it may be stale while the provider is down).
        case usable
        /// A sign-in needed the set and none could be fetched yet: sign-ins with that provider
        /// answer 503 `provider_unavailable`.
        case unavailable
        /// No sign-in has needed the set yet: nothing was fetched.
        case unused
    }

    private struct Entry: Sendable {
        let url: String
        let cache: JWKSCache
    }

    private struct Sets: Sendable {
        var entries: [String: Entry] = [:]
        /// ``runBackground()``'s listeners, told of every key set added or replaced.
        var listeners: [Int: AsyncStream<(String, JWKSCache)>.Continuation] = [:]
        var nextListener = 0
    }

    private let sets = Mutex(Sets())
    private let httpClient: HTTPClient
    private let logger: Logger
    private let fetchTimeout: Duration
    private let minimumRefetchInterval: Duration
    private let refreshInterval: Duration
    private let unavailableRetryInterval: Duration
    private let failureLogInterval: Duration
    private let now: @Sendable () -> ContinuousClock.Instant

    /// - Parameters:
    ///   - fetchTimeout: how long one key set fetch may take as a whole (`BROKER_PROVIDER_TIMEOUT`).
    ///   - minimumRefetchInterval, refreshInterval, unavailableRetryInterval, failureLogInterval,
    ///     now: as ``JWKSCache``'s, for every set made here.
    public init(
        httpClient: HTTPClient = .providers, logger: Logger, fetchTimeout: Duration,
        minimumRefetchInterval: Duration = .seconds(30), refreshInterval: Duration = .seconds(3_600),
        unavailableRetryInterval: Duration = .seconds(1), failureLogInterval: Duration = .seconds(60),
        now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) {
        self.httpClient = httpClient
        self.logger = logger
        self.fetchTimeout = fetchTimeout
        self.minimumRefetchInterval = minimumRefetchInterval
        self.refreshInterval = refreshInterval
        self.unavailableRetryInterval = unavailableRetryInterval
        self.failureLogInterval = failureLogInterval
        self.now = now
    }

    /// Declares a key set known from the start (the built-ins); reported `unused` until first
    /// need. Returns its cache, which fetches nothing until a lookup needs it. Idempotent: a key
    /// declared before keeps its set whatever the url (a test's injected cache stays when the
    /// provider declares its own).
    @discardableResult
    public func declare(_ key: String, url: String) -> JWKSCache {
        sets.withLock { sets in
            if let entry = sets.entries[key] { return entry.cache }
            return make(key, url: url, in: &sets)
        }
    }

    /// Declares `cache` as the key set of `key` (a test's cache, or a fixed set); reported like
    /// any other. Replaces what `key` held.
    @discardableResult
    public func declare(_ key: String, cache: JWKSCache) -> JWKSCache {
        let url: String
        switch cache.source {
        case .url(let source): url = source
        case .fixed: url = ""
        }
        sets.withLock { sets in install(key, Entry(url: url, cache: cache), in: &sets) }
        return cache
    }

    /// The key set for `key` at `url`, created at first call (OIDC issuers); a different url for
    /// the same key replaces it (its background refresh stops). One lock: cheap on the sign-in path.
    public func keys(_ key: String, url: String) -> JWKSCache {
        sets.withLock { sets in
            if let entry = sets.entries[key], entry.url == url { return entry.cache }
            return make(key, url: url, in: &sets)
        }
    }

    private func make(_ key: String, url: String, in sets: inout Sets) -> JWKSCache {
        let cache = JWKSCache(
            source: .url(url), httpClient: httpClient, logger: logger, minimumRefetchInterval: minimumRefetchInterval,
            refreshInterval: refreshInterval, unavailableRetryInterval: unavailableRetryInterval, fetchTimeout: fetchTimeout,
            failureLogInterval: failureLogInterval, now: now)
        install(key, Entry(url: url, cache: cache), in: &sets)
        return cache
    }

    private func install(_ key: String, _ entry: Entry, in sets: inout Sets) {
        sets.entries[key] = entry
        for listener in sets.listeners.values { listener.yield((key, entry.cache)) }
    }

    /// Each key set's state, by key.
    public func states() -> [String: State] {
        sets.withLock { $0.entries }.mapValues { Self.state(of: $0.cache) }
    }

    static func state(of cache: JWKSCache) -> State {
        if cache.isUsable { return .usable }
        return cache.isNeeded ? .unavailable : .unused
    }

    /// Background refresh of every key set once it has been needed (``JWKSCache/runRefreshLoopOnceNeeded()``),
    /// including the sets added later; a replaced set's refresh stops. Runs until cancelled.
    public func runBackground() async {
        let (added, listener) = AsyncStream.makeStream(of: (String, JWKSCache).self)
        let (id, initial) = sets.withLock { sets -> (Int, [String: Entry]) in
            sets.nextListener += 1
            sets.listeners[sets.nextListener] = listener
            return (sets.nextListener, sets.entries)
        }
        var loops: [String: Task<Void, Never>] = [:]
        for (key, entry) in initial {
            let cache = entry.cache
            loops[key] = Task { await cache.runRefreshLoopOnceNeeded() }
        }
        // The stream ends when this task is cancelled.
        for await (key, cache) in added {
            loops[key]?.cancel()
            loops[key] = Task { await cache.runRefreshLoopOnceNeeded() }
        }
        sets.withLock { _ = $0.listeners.removeValue(forKey: id) }
        for loop in loops.values { loop.cancel() }
        for loop in loops.values { await loop.value }
    }
}

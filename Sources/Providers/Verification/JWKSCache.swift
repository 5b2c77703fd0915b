import AsyncHTTPClient
import BrokerCore
import Foundation
import JWTKit
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// A provider's signing keys, kept in memory. The request path never fetches, except one
/// rate-limited refetch when a token names an unknown `kid` (the provider rotated its keys).
/// A background loop refreshes the set; when the provider is unreachable the cached keys keep
/// serving. A fetched set replaces the cached one only when it holds at least one usable key:
/// an error status, a malformed body or an empty set (`{"keys": []}`) is a failed fetch
/// (decision 0019). While no usable set has ever been fetched, lookups answer
/// ``KeyLookup/unavailable`` (the provider is down, not the token wrong) and fetches are
/// retried every `unavailableRetryInterval`, so the first good fetch ends the outage.
///
/// A set is fetched only once it is needed: the first lookup marks it needed (and fetches on
/// the request path); ``runRefreshLoopOnceNeeded()`` waits for that before its first fetch, so
/// a provider no tenant uses is never fetched (decision 0036).
public actor JWKSCache {
    /// What a lookup of (kid, alg) found.
    public enum KeyLookup: Sendable {
        /// The published key, as jwt-kit's verifying algorithm.
        case key(any JWTAlgorithm)
        /// The current set does not publish that kid (after at most one rate-limited refetch).
        case unknown
        /// No usable key set could be fetched yet: the provider is unreachable or answers
        /// nothing usable.
        case unavailable
    }

    public enum Source: Sendable {
        /// Fetched with GET from this URL.
        case url(String)
        /// A fixed key set (a file, for `broker token verify --jwks`).
        case fixed(Data)
    }

    let source: Source
    let httpClient: HTTPClient
    let logger: Logger
    let minimumRefetchInterval: Duration
    let refreshInterval: Duration
    let unavailableRetryInterval: Duration
    /// How long one fetch may take as a whole: connecting, the head and the whole body.
    let fetchTimeout: Duration
    /// At most one failure line per this interval (a provider down for an hour is retried
    /// every second while nothing is cached).
    let failureLogInterval: Duration
    /// The clock of the failure log's interval, the request path's refetch intervals and the
    /// refresh loop's view of how fresh the set is (a test moves it).
    let now: @Sendable () -> ContinuousClock.Instant

    /// The kids of the current set and the collection holding their keys. Read without
    /// entering the actor: a known kid (every sign-in but the first after a rotation) costs
    /// one lock, no actor hop.
    private nonisolated let current = Mutex<(kids: Set<String>, collection: JWTKeyCollection)>(([], JWTKeyCollection()))
    /// Verifying algorithms already built from the current set's keys, by kid and alg.
    private struct Algorithms {
        struct Key: Hashable {
            let kid: String
            let alg: String
        }
        var collection: JWTKeyCollection?
        var byKey: [Key: any JWTAlgorithm] = [:]
    }
    private nonisolated let algorithms = Mutex(Algorithms())
    /// Whether a lookup has needed the set (read lock-free on every lookup).
    private nonisolated let needed = Atomic<Bool>(false)
    /// Tasks waiting for the first need (``waitUntilNeeded()``), by waiter id.
    private nonisolated let needWaiters = Mutex<(needed: Bool, nextID: Int, waiting: [Int: CheckedContinuation<Void, Never>])>(
        (false, 0, [:]))
    private var lastAttempt: ContinuousClock.Instant?
    /// When the set was last fetched successfully.
    private var lastSuccess: ContinuousClock.Instant?
    private var inFlight: Task<Void, any Error>?
    public private(set) var lastError: String?
    /// When a failure was last logged, and the failures since that were not.
    private var lastFailureLog: ContinuousClock.Instant?
    private var unloggedFailures = 0

    /// - Parameters:
    ///   - minimumRefetchInterval: at most one request-path refetch per interval while a set
    ///     is cached (anyone can send an unknown `kid`).
    ///   - refreshInterval: how often the background loop refetches a good set.
    ///   - unavailableRetryInterval: how often fetches are retried (background loop and request
    ///     path) while no usable set is cached.
    ///   - fetchTimeout: how long one fetch may take as a whole (connect, head and body).
    ///   - failureLogInterval: at most one logged fetch failure per interval.
    ///   - now: the clock of the failure log's interval and of the refetch intervals.
    public init(
        source: Source, httpClient: HTTPClient = .providers, logger: Logger, minimumRefetchInterval: Duration = .seconds(30),
        refreshInterval: Duration = .seconds(3_600), unavailableRetryInterval: Duration = .seconds(1),
        fetchTimeout: Duration = .seconds(5), failureLogInterval: Duration = .seconds(60),
        now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) {
        self.source = source
        self.httpClient = httpClient
        self.logger = logger
        self.minimumRefetchInterval = minimumRefetchInterval
        self.refreshInterval = refreshInterval
        self.unavailableRetryInterval = unavailableRetryInterval
        self.fetchTimeout = fetchTimeout
        self.failureLogInterval = failureLogInterval
        self.now = now
    }

    /// Whether a usable key set is cached (it may be stale while the provider is down).
    public nonisolated var isUsable: Bool { current.withLock { !$0.kids.isEmpty } }

    /// Whether a lookup has needed the set since the cache was made.
    public nonisolated var isNeeded: Bool { needed.load(ordering: .acquiring) }

    /// Marks the set needed and wakes ``waitUntilNeeded()``'s waiters (once; later calls cost
    /// one atomic load).
    nonisolated func markNeeded() {
        guard !needed.load(ordering: .acquiring) else { return }
        let waiting = needWaiters.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.needed = true
            needed.store(true, ordering: .releasing)
            defer { state.waiting = [:] }
            return Array(state.waiting.values)
        }
        for waiter in waiting { waiter.resume() }
    }

    /// Returns once a lookup has needed the set, or when the task is cancelled.
    public nonisolated func waitUntilNeeded() async {
        let id = needWaiters.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = needWaiters.withLock { state -> Bool in
                    if state.needed || Task.isCancelled { return true }
                    state.waiting[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            needWaiters.withLock { $0.waiting.removeValue(forKey: id) }?.resume()
        }
    }

    /// The key collection holding `kid`, or nil when the provider does not publish it
    /// (after at most one rate-limited refetch).
    nonisolated func collection(for kid: String) async -> JWTKeyCollection? {
        markNeeded()
        if let known = published(kid) { return known }
        return await refetchingCollection(for: kid)
    }

    private nonisolated func published(_ kid: String) -> JWTKeyCollection? {
        current.withLock { $0.kids.contains(kid) ? $0.collection : nil }
    }

    /// The algorithm that verifies `alg` signatures with the published key `kid`, or nil when
    /// the provider does not publish that key (after at most one rate-limited refetch) or the
    /// key cannot verify `alg`. jwt-kit builds it from the JWK once per key set; later calls
    /// cost one lock. The caller still compares the algorithm's name with the token's `alg`:
    /// a JWK that names its own algorithm keeps it.
    nonisolated func lookup(kid: String, alg: String) async -> KeyLookup {
        markNeeded()
        let key = Algorithms.Key(kid: kid, alg: alg)
        if let known = algorithms.withLock({ $0.byKey[key] }) { return .key(known) }
        guard let collection = await collection(for: kid) else { return isUsable ? .unknown : .unavailable }
        guard let algorithm = try? await collection.getKey(for: JWKIdentifier(string: kid), alg: alg) else { return .unknown }
        algorithms.withLock { algorithms in
            // Only for the key set still current: a refresh in between starts a new map.
            if algorithms.collection === collection { algorithms.byKey[key] = algorithm }
        }
        return .key(algorithm)
    }

    private func refetchingCollection(for kid: String) async -> JWTKeyCollection? {
        if let known = published(kid) { return known }
        let interval = isUsable ? minimumRefetchInterval : unavailableRetryInterval
        if let inFlight {
            _ = try? await inFlight.value
        } else if lastAttempt.map({ now() - $0 >= interval }) ?? true {
            _ = try? await refresh()
        }
        return published(kid)
    }

    /// Fetches the key set now (joins a fetch already under way).
    public func refresh() async throws {
        if let inFlight { return try await inFlight.value }
        lastAttempt = now()
        let task = Task { try await self.load() }
        inFlight = task
        defer { inFlight = nil }
        do {
            try await task.value
            lastError = nil
            lastSuccess = now()
        } catch {
            lastError = "\(error)"
            logFailure(error)
            throw error
        }
    }

    /// Logs a failed fetch at most once per `failureLogInterval`, saying whether cached keys
    /// still serve and how many failures the interval left unlogged.
    private func logFailure(_ error: any Error) {
        let time = now()
        if let lastFailureLog, time - lastFailureLog < failureLogInterval {
            unloggedFailures += 1
            return
        }
        lastFailureLog = time
        let count = current.withLock { $0.kids.count }
        var metadata: Logger.Metadata = [
            "key_set": "\(sourceDescription)", "error": "\(error)", "cached_keys": "\(count)",
            "failures_not_logged": "\(unloggedFailures)",
        ]
        if count == 0 { metadata["hint"] = "sign-ins with this provider answer 503 provider_unavailable until a fetch succeeds" }
        unloggedFailures = 0
        logger.warning(
            count > 0 ? "key set fetch failed; serving the \(count) cached keys" : "key set fetch failed; no keys are cached",
            metadata: metadata)
    }

    private var sourceDescription: String {
        switch source {
        case .url(let url): url
        case .fixed: "fixed key set"
        }
    }

    /// Refreshes every `refreshInterval` until cancelled. After a failed fetch it retries
    /// sooner: every `unavailableRetryInterval` while no usable set is cached, else with a
    /// backoff from that interval doubling up to `refreshInterval`.
    public func runRefreshLoop() async {
        var failures = 0
        // A set fetched a moment ago (at first need, on the request path) is not fetched again.
        if let lastSuccess, isUsable, now() - lastSuccess < refreshInterval {
            try? await Task.sleep(for: refreshInterval - (now() - lastSuccess))
        }
        while !Task.isCancelled {
            let pause: Duration
            do {
                try await refresh()
                failures = 0
                pause = refreshInterval
            } catch {
                failures += 1
                let backoff = unavailableRetryInterval * (1 << min(failures - 1, 16))
                pause = isUsable ? min(backoff, refreshInterval) : unavailableRetryInterval
            }
            try? await Task.sleep(for: pause)
        }
    }

    /// ``runRefreshLoop()`` from the first need on: nothing is fetched before a lookup needs
    /// the set. Returns when cancelled.
    public func runRefreshLoopOnceNeeded() async {
        await waitUntilNeeded()
        guard !Task.isCancelled else { return }
        await runRefreshLoop()
    }

    public var knownKeyIDs: [String] { current.withLock { $0.kids.sorted() } }

    /// The most keys a set may list (providers publish two or three).
    static let maxKeys = 100

    private func load() async throws {
        let data: Data
        switch source {
        case .fixed(let fixed):
            data = fixed
        case .url(let url):
            var request = HTTPClientRequest(url: url)
            request.headers.add(name: "Accept", value: "application/json")
            // Key sets pace their own fetches (at most one a second while unusable), without a circuit.
            let answer = try await ProviderAnswer.fetch(request, with: httpClient, timeout: fetchTimeout, circuits: nil)
            guard answer.status == 200 else {
                throw TokenVerificationError("jwks_unavailable", "GET \(url) answered \(answer.status).")
            }
            data = Data(answer.body.readableBytesView)
        }
        // The strict parser first: well-formed UTF-8 JSON, shallow (a JWK nests three levels
        // deep), no duplicate members, and a bounded number of keys; only then jwt-kit's
        // decoding of each key.
        guard let entries = (try? JSONValue.parse(data, maxDepth: 8))?["keys"]?.array, entries.count <= Self.maxKeys else {
            throw TokenVerificationError(
                "jwks_malformed", "The key set is not a JSON object with a `keys` array of at most \(Self.maxKeys) keys.")
        }
        let jwks: LenientJWKS
        do {
            jwks = try JSONDecoder().decode(LenientJWKS.self, from: data)
        } catch {
            throw TokenVerificationError("jwks_malformed", "The key set is not a JSON object with a `keys` array.")
        }
        let fresh = JWTKeyCollection()
        var kids: Set<String> = []
        for key in jwks.keys.compactMap(\.key) {
            guard let kid = key.keyIdentifier?.string, kid.utf8.count <= 256 else { continue }
            // Keys of a type or algorithm we do not verify with are skipped, not fatal.
            do {
                try await fresh.add(jwk: key)
                kids.insert(kid)
            } catch {
                logger.debug("skipping JWKS key", metadata: ["kid": "\(kid)", "error": "\(error)"])
            }
        }
        // An empty or wholly unusable set is an answer nobody can verify with: keep what we have.
        guard !kids.isEmpty else {
            throw TokenVerificationError("jwks_empty", "The key set holds no usable key (\(jwks.keys.count) entries).")
        }
        current.withLock { $0 = (kids, fresh) }
        algorithms.withLock { $0 = Algorithms(collection: fresh) }
    }
}

/// A JWKS whose keys decode one at a time: a key jwt-kit cannot even decode (`kty` `oct`, an
/// `alg` it does not know) is skipped like any other unusable key instead of failing the set.
/// Seen with jwt-kit 5.8.0 (`JWKS` decodes `keys` as `[JWK]`, and `JWK.KeyType` throws on an
/// unknown `kty`). Can go when jwt-kit's own `JWKS` skips such keys and the key-set test with
/// an `oct` key (`JWKSCacheTests`) passes through it (docs/upstream.md, "Other libraries").
private struct LenientJWKS: Decodable {
    struct Entry: Decodable {
        let key: JWK?
        init(from decoder: any Decoder) throws { key = try? JWK(from: decoder) }
    }
    let keys: [Entry]
}

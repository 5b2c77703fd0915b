import BrokerCore
import Foundation
import Logging
import MockIdP
import TestSupport
import Testing

@testable import Providers

/// Key sets fetched at first need (decision 0036), against the mock Apple IdP on loopback: a
/// declared set is `unused` and fetches nothing until a lookup needs it, then `unavailable` or
/// `usable`; the background refresh starts at first need, also for sets added later.
@Suite struct ProviderKeySetsTests {
    typealias F = VerifierFixture

    @Test func aKeySetIsUnusedUntilALookupNeedsItThenUnavailableOrUsable() async throws {
        try await MockAppleServer.with { apple, baseURL in
            let clock = ManualClock()
            let sets = ProviderKeySets(logger: F.logger, fetchTimeout: .seconds(60), now: { clock.now })
            let cache = sets.declare("apple", url: baseURL + "/auth/keys")
            #expect(sets.declare("apple", url: baseURL + "/elsewhere") === cache)
            #expect(sets.states() == ["apple": .unused])
            #expect(!cache.isNeeded)
            #expect(apple.keyFetches == 0)

            // Down at first need: one fetch on the request path, then none until the retry
            // interval (1 s) has passed on the cache's clock.
            apple.keysFault = .unavailable
            let verifier = IdentityTokenVerifier(policy: F.applePolicy(), keys: cache)
            let token = try apple.mint(F.claims(apple))
            #expect(await verifier.failureCode(token) == "provider_unavailable")
            #expect(sets.states() == ["apple": .unavailable])
            #expect(apple.keyFetches == 1)
            apple.keysFault = .none
            #expect(await verifier.failureCode(token) == "provider_unavailable")
            #expect(apple.keyFetches == 1)

            clock.advance(by: .seconds(1))
            #expect(await verifier.failureCode(token) == nil)
            #expect(apple.keyFetches == 2)
            #expect(sets.states() == ["apple": .usable])
        }
    }

    @Test func anIssuersKeySetIsMadeAtFirstCallAndReplacedWhenItsURLChanges() async throws {
        let sets = ProviderKeySets(logger: F.logger, fetchTimeout: .seconds(1))
        let injected = sets.declare("apple", cache: JWKSCache(source: .fixed(try F.apple().jwksJSON()), logger: F.logger))
        // The provider's own declaration keeps the injected cache.
        #expect(sets.declare("apple", url: "http://127.0.0.1:9/auth/keys") === injected)
        let issuer = "https://login.example.com"
        let first = sets.keys(issuer, url: "http://127.0.0.1:9/jwks")
        #expect(sets.keys(issuer, url: "http://127.0.0.1:9/jwks") === first)
        let moved = sets.keys(issuer, url: "http://127.0.0.1:9/jwks2")
        #expect(moved !== first)
        #expect(sets.keys(issuer, url: "http://127.0.0.1:9/jwks2") === moved)
        #expect(sets.states() == ["apple": .unused, issuer: .unused])

        // A fixed set needed once is usable.
        let apple = try F.apple()
        let verifier = IdentityTokenVerifier(policy: F.applePolicy(), keys: injected)
        let token = try apple.mint(F.claims(apple))
        #expect(await verifier.failureCode(token) == nil)
        #expect(sets.states() == ["apple": .usable, issuer: .unused])
    }

    /// Each failed fetch is logged (no log interval): the background refresh's retries are seen
    /// as log lines, awaited one by one.
    // A guard against a hang (the whole run's length under parallel load), not a bound on speed.
    @Test(.timeLimit(.minutes(10)))
    func theBackgroundRefreshStartsAtFirstNeedAlsoForKeySetsAddedLater() async throws {
        try await MockAppleServer.with { apple, baseURL in
            let (failures, failed) = AsyncStream.makeStream(of: String.self)
            let logger = Logger(label: "key-sets") { _ in FailureLines(lines: failed) }
            let sets = ProviderKeySets(
                logger: logger, fetchTimeout: .seconds(60), unavailableRetryInterval: .milliseconds(20), failureLogInterval: .zero)
            let background = Task { await sets.runBackground() }
            defer { background.cancel() }
            apple.keysFault = .unavailable

            // Added after the background runner started, needed by one lookup: the request
            // path's fetch, then the background's retries every 20 ms.
            let url = baseURL + "/auth/keys"
            let cache = sets.keys("https://issuer.example.com", url: url)
            #expect(apple.keyFetches == 0)
            let verifier = IdentityTokenVerifier(policy: F.applePolicy(), keys: cache)
            let token = try apple.mint(F.claims(apple))
            #expect(await verifier.failureCode(token) == "provider_unavailable")
            var lines = failures.makeAsyncIterator()
            for _ in 0..<4 { #expect(await lines.next() == url) }
            #expect(apple.keyFetches >= 4)
            #expect(sets.states() == ["https://issuer.example.com": .unavailable])
        }
    }
}

/// Yields the key set named by each failed fetch's log line.
private struct FailureLines: LogHandler {
    let lines: AsyncStream<String>.Continuation
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        if event.level == .warning, let keySet = event.metadata?["key_set"] { lines.yield("\(keySet)") }
    }
}

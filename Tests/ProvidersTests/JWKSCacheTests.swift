import BrokerCore
import Foundation
import JWTKit
import MockIdP
import TestSupport
import Testing

@testable import Providers

/// Key rotation, the rate-limited refetch on an unknown `kid`, and serving from cache while the
/// provider is down, against the mock Apple IdP on loopback.
@Suite struct JWKSCacheTests {
    typealias F = VerifierFixture

    /// A cache on MockIdP's keys. These tests are about when the cache fetches, not how long a
    /// fetch may take: the fetch timeout is generous, so that a fetch slowed by the whole test
    /// suite on two cores does not fail (KeySetAnswerTests covers the timeout).
    static func liveCache(_ baseURL: String, minimumRefetchInterval: Duration = .zero) -> JWKSCache {
        JWKSCache(
            source: .url(baseURL + "/auth/keys"), logger: F.logger, minimumRefetchInterval: minimumRefetchInterval,
            fetchTimeout: .seconds(60))
    }

    @Test func aTokenSignedWithAnUnpublishedKeyIsAcceptedOnceTheKeyIsPublished() async throws {
        try await MockAppleServer.with { apple, baseURL in
            let cache = Self.liveCache(baseURL)
            let verifier = IdentityTokenVerifier(policy: F.applePolicy(), keys: cache)
            let before = try apple.mint(F.claims(apple))
            #expect(await verifier.failureCode(before) == nil)

            let (kid, publish) = try apple.rotateKeysUnpublished()
            let rotated = try apple.mint(F.claims(apple))
            #expect(try F.segment(rotated, 0)["kid"] as? String == kid)
            #expect(await verifier.failureCode(rotated) == "unknown_key")
            #expect(await !cache.knownKeyIDs.contains(kid))

            publish()
            let claims = try await verifier.verify(rotated, nonce: .none, at: F.now)
            #expect(claims.subject == F.subject)
            #expect(await cache.knownKeyIDs.contains(kid))
            // The earlier key is still published and still verifies.
            #expect(await verifier.failureCode(before) == nil)
        }
    }

    @Test func aTokenWithANewKidVerifiesAfterARotationThanksToTheRefetch() async throws {
        try await MockAppleServer.with { apple, baseURL in
            let cache = Self.liveCache(baseURL)
            let verifier = IdentityTokenVerifier(policy: F.applePolicy(), keys: cache)
            let old = try apple.mint(F.claims(apple))
            #expect(await verifier.failureCode(old) == nil)
            #expect(await cache.knownKeyIDs == [apple.currentKeyID])

            let newKid = try apple.rotateKeys()
            let fresh = try apple.mint(F.claims(apple))
            #expect(try F.segment(fresh, 0)["kid"] as? String == newKid)
            #expect(await verifier.failureCode(fresh) == nil)
            #expect(await cache.knownKeyIDs.count == 2)
            #expect(await verifier.failureCode(old) == nil)

            // Apple retires the old keys: once the set is refreshed, their tokens are unknown.
            let newest = try apple.rotateKeys(keepOld: false)
            #expect(await verifier.failureCode(try apple.mint(F.claims(apple))) == nil)
            #expect(await cache.knownKeyIDs == [newest])
            #expect(await verifier.failureCode(old) == "unknown_key")
            #expect(await verifier.failureCode(fresh) == "unknown_key")
        }
    }

    @Test func anUnknownKidDoesNotRefetchTwiceWithinTheInterval() async throws {
        try await MockAppleServer.with { apple, baseURL in
            let cache = Self.liveCache(baseURL, minimumRefetchInterval: .seconds(3_600))
            let verifier = IdentityTokenVerifier(policy: F.applePolicy(), keys: cache)

            let (kid, publish) = try apple.rotateKeysUnpublished()
            let token = try apple.mint(F.claims(apple))
            // First sight of the kid: one fetch, which does not have it yet.
            #expect(await verifier.failureCode(token) == "unknown_key")
            #expect(await cache.knownKeyIDs.count == 1)

            publish()
            // Inside the interval the cache does not fetch again, however often it is asked.
            for _ in 0..<3 {
                #expect(await verifier.failureCode(token) == "unknown_key")
            }
            #expect(await !cache.knownKeyIDs.contains(kid))

            // The key was there all along: an explicit refresh (the background loop) finds it.
            try await cache.refresh()
            #expect(await cache.knownKeyIDs.contains(kid))
            #expect(await verifier.failureCode(token) == nil)
        }
    }

    @Test func concurrentUnknownKidsShareOneFetch() async throws {
        try await MockAppleServer.with { apple, baseURL in
            let cache = Self.liveCache(baseURL, minimumRefetchInterval: .seconds(3_600))
            let verifier = IdentityTokenVerifier(policy: F.applePolicy(), keys: cache)
            let token = try apple.mint(F.claims(apple))
            let codes = await withTaskGroup(of: String?.self, returning: [String?].self) { group in
                for _ in 0..<8 { group.addTask { await verifier.failureCode(token) } }
                return await group.reduce(into: []) { $0.append($1) }
            }
            // Every caller either made or joined the first fetch, so all of them see the key.
            #expect(codes == Array(repeating: nil, count: 8))
        }
    }

    @Test func cachedKeysKeepServingWhenTheProviderIsDown() async throws {
        let (cache, token) = try await MockAppleServer.with { apple, baseURL in
            let cache = Self.liveCache(baseURL)
            let token = try apple.mint(F.claims(apple))
            #expect(await IdentityTokenVerifier(policy: F.applePolicy(), keys: cache).failureCode(token) == nil)
            #expect(await cache.lastError == nil)
            return (cache, token)
        }
        // The server is gone. Fetching fails (after the client's connect retries, ~10 s); the
        // keys fetched earlier are kept and still verify, without touching the network.
        await #expect(throws: (any Error).self) { try await cache.refresh() }
        #expect(await cache.lastError != nil)
        #expect(await cache.knownKeyIDs.count == 1)
        let claims = try await IdentityTokenVerifier(policy: F.applePolicy(), keys: cache).verify(token, nonce: .none, at: F.now)
        #expect(claims.subject == F.subject)
    }

    @Test func aProviderAnsweringErrorsLeavesTheCacheAsItWas() async throws {
        try await MockAppleServer.with { apple, baseURL in
            let cache = Self.liveCache(baseURL)
            let verifier = IdentityTokenVerifier(policy: F.applePolicy(), keys: cache)
            let token = try apple.mint(F.claims(apple))
            #expect(await verifier.failureCode(token) == nil)

            // A second cache whose URL answers 404 never gets a key, and says why.
            let broken = JWKSCache(source: .url(baseURL + "/auth/no-such-path"), logger: F.logger, minimumRefetchInterval: .zero)
            await #expect(throws: TokenVerificationError.self) { try await broken.refresh() }
            #expect(await broken.lastError?.contains("404") == true)
            // With no key ever fetched the provider is unavailable: not the token's fault.
            #expect(await IdentityTokenVerifier(policy: F.applePolicy(), keys: broken).failureCode(token) == "provider_unavailable")
            #expect(await broken.knownKeyIDs.isEmpty)
            #expect(!broken.isUsable)
        }
    }

    @Test(arguments: [MockAppleIdP.KeysFault.emptySet, .malformed, .unavailable])
    func aBadAnswerNeverReplacesCachedKeys(_ fault: MockAppleIdP.KeysFault) async throws {
        try await MockAppleServer.with { apple, baseURL in
            let cache = Self.liveCache(baseURL)
            let verifier = IdentityTokenVerifier(policy: F.applePolicy(), keys: cache)
            let token = try apple.mint(F.claims(apple))
            #expect(await verifier.failureCode(token) == nil)

            apple.keysFault = fault
            // The background refresh and an unknown kid's refetch both meet the fault.
            await #expect(throws: (any Error).self) { try await cache.refresh() }
            let strange = try apple.mint(F.claims(apple), header: ["kid": .string("never-published")])
            #expect(await verifier.failureCode(strange) == "unknown_key")
            #expect(await cache.knownKeyIDs == [apple.currentKeyID])
            #expect(cache.isUsable)
            #expect(await verifier.failureCode(token) == nil)
        }
    }

    /// A cache whose provider is down from the start, with hour-long refetch and refresh
    /// intervals: only the short retry while nothing is cached can bring it back.
    static func coldCache(_ apple: MockAppleIdP, _ baseURL: String, retry: Duration) -> JWKSCache {
        apple.keysFault = .unavailable
        return JWKSCache(
            source: .url(baseURL + "/auth/keys"), logger: F.logger, minimumRefetchInterval: .seconds(3_600),
            refreshInterval: .seconds(3_600), unavailableRetryInterval: retry)
    }

    @Test func aColdCacheRecoversAtTheFirstGoodFetchWithoutWaitingForTheRefetchInterval() async throws {
        try await MockAppleServer.with { apple, baseURL in
            let cache = Self.coldCache(apple, baseURL, retry: .milliseconds(200))
            let verifier = IdentityTokenVerifier(policy: F.applePolicy(), keys: cache)
            let token = try apple.mint(F.claims(apple))
            let started = ContinuousClock.now
            #expect(await verifier.failureCode(token) == "provider_unavailable")
            // Within the retry interval the request path does not fetch again (checked only
            // when this machine was quick enough to ask again within it).
            let fetches = apple.keyFetches
            #expect(await verifier.failureCode(token) == "provider_unavailable")
            if ContinuousClock.now - started < .milliseconds(200) { #expect(apple.keyFetches == fetches) }

            apple.keysFault = .none
            try await Task.sleep(for: .milliseconds(250))
            #expect(await verifier.failureCode(token) == nil)
            #expect(cache.isUsable)
        }
    }

    @Test func theRefreshLoopRetriesQuicklyWhileNothingIsCached() async throws {
        try await MockAppleServer.with { apple, baseURL in
            let cache = Self.coldCache(apple, baseURL, retry: .milliseconds(100))
            let loop = Task { await cache.runRefreshLoop() }
            defer { loop.cancel() }
            // Failed fetches repeat every 100 ms (not every hour).
            var polls = 0
            while apple.keyFetches < 3, polls < 100 {
                try await Task.sleep(for: .milliseconds(50))
                polls += 1
            }
            #expect(apple.keyFetches >= 3)
            #expect(!cache.isUsable)
            apple.keysFault = .none
            var waited = 0
            while !cache.isUsable, waited < 60 {
                try await Task.sleep(for: .milliseconds(50))
                waited += 1
            }
            #expect(cache.isUsable)
            #expect(await cache.knownKeyIDs == [apple.currentKeyID])
        }
    }

    @Test func anUnreadableKeySetIsAnError() async throws {
        for text in ["not a key set", #"{"keys":"none"}"#, #"{"kty":"RSA"}"#] {
            let cache = JWKSCache(source: .fixed(Data(text.utf8)), logger: F.logger)
            await #expect(throws: (any Error).self) { try await cache.refresh() }
            #expect(await cache.lastError != nil)
            #expect(await cache.knownKeyIDs.isEmpty)
        }
    }

    @Test func aFixedSourceLoadsOnFirstUseAndSkipsUnusableKeys() async throws {
        let apple = try F.apple()
        var document = try #require(try JSONSerialization.jsonObject(with: apple.jwksJSON()) as? [String: Any])
        var keys = try #require(document["keys"] as? [[String: Any]])
        keys.append(["kty": "oct", "kid": "symmetric", "k": "c2VjcmV0"])
        keys.append(["kty": "RSA", "kid": "encryption", "use": "enc", "alg": "RSA-OAEP-256", "n": "AQAB", "e": "AQAB"])
        keys.append(["kty": "RSA", "n": "AQAB", "e": "AQAB"])  // no kid
        document["keys"] = keys
        let cache = JWKSCache(source: .fixed(try JSONSerialization.data(withJSONObject: document)), logger: F.logger)
        #expect(await cache.knownKeyIDs.isEmpty)
        let verifier = IdentityTokenVerifier(policy: F.applePolicy(), keys: cache)
        #expect(await verifier.failureCode(try apple.mint(F.claims(apple))) == nil)
        #expect(await cache.knownKeyIDs == [apple.currentKeyID])
    }
}

import BrokerCore
import Foundation
import JWTKit
import Logging
import MockIdP
import TestSupport
import Testing

@testable import Providers

/// Issue 20 §2, §5 and §9 for key sets, over HTTP to MockIdP: a mutated key set (odd members,
/// wrong types, huge arrays, deep nesting, invalid UTF-8) is a failed fetch, never a crash; a
/// key set trickling in one byte a second is cut off at the fetch timeout; failures are logged
/// at most once a minute, saying whether cached keys still serve.
@Suite(.tags(.timing)) struct KeySetAnswerTests {
    typealias F = VerifierFixture

    /// The mock's key set with its first key's members replaced (raw JSON texts).
    static func mutatedSet(_ apple: MockAppleIdP, _ changes: [String: String]) throws -> Data {
        let document = try #require(try JSONSerialization.jsonObject(with: apple.jwksJSON()) as? [String: Any])
        let key = try #require((document["keys"] as? [[String: Any]])?.first)
        var members = try key.mapValues { value -> String in
            String(decoding: try JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed]), as: UTF8.self)
        }
        for (name, value) in changes { members[name] = value }
        let text = "{\"keys\":[{" + members.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}]}"
        return Data(text.utf8)
    }

    static func mutations(_ apple: MockAppleIdP) throws -> [(String, Data)] {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        let hugeArray = "[" + Array(repeating: "\"a\"", count: 100_000).joined(separator: ",") + "]"
        var bodies: [(String, Data)] = []
        for (member, values) in [
            ("kid", ["5", "1e300", "null", "[]", "\"" + String(repeating: "k", count: 300_000) + "\""]),
            ("n", ["5", "-1", "1.5", "\"!!!\"", "[]", "{}", "\"\"", "\"" + String(repeating: "A", count: 65_536) + "\"", deep]),
            ("e", ["1e300", "{}", "\"" + String(repeating: "AQAB", count: 1_024) + "\"", "null"]),
            ("kty", ["5", "\"oct\"", "null"]), ("alg", ["5", "\"none\""]),
        ] {
            for value in values { bodies.append(("\(member) \(value.prefix(12))", try mutatedSet(apple, [member: value]))) }
        }
        // A member the broker does not use: jwt-kit ignores it, whatever it holds.
        bodies += [("x5c huge", try mutatedSet(apple, ["x5c": hugeArray])), ("x5c 5", try mutatedSet(apple, ["x5c": "5"]))]
        let key = String(decoding: try apple.jwksJSON(), as: UTF8.self).dropFirst(9).dropLast(2)
        bodies += [
            ("keys 5", Data(#"{"keys":5}"#.utf8)), ("keys null", Data(#"{"keys":null}"#.utf8)),
            ("keys object", Data(#"{"keys":{}}"#.utf8)),
            ("200 keys", Data(("{\"keys\":[" + Array(repeating: String(key), count: 200).joined(separator: ",") + "]}").utf8)),
            ("deep", Data(deep.utf8)), ("invalid UTF-8", Data([0x7B, 0x22, 0x6B, 0xFF, 0xC3, 0x22, 0x3A, 0x5B, 0x5D, 0x7D])),
            ("1 MiB string", Data(("\"" + String(repeating: "x", count: 1 << 20) + "\"").utf8)),
        ]
        return bodies
    }

    @Test func mutatedKeySetsAreFailedFetchesNeverACrash() async throws {
        try await MockAppleServer.with { apple, baseURL in
            let token = try apple.mint(F.claims(apple))
            for (label, body) in try Self.mutations(apple) {
                apple.keysFault = .answer(status: 200, body: body)
                let cache = JWKSCache(source: .url(baseURL + "/auth/keys"), logger: F.logger, minimumRefetchInterval: .zero)
                if label.hasPrefix("x5c") {
                    // The key's own members are whole: it serves.
                    try await cache.refresh()
                    #expect(await cache.knownKeyIDs == [apple.currentKeyID], "\(label)")
                    continue
                }
                await #expect(throws: (any Error).self, "\(label)") { try await cache.refresh() }
                #expect(!cache.isUsable, "\(label)")
                let verifier = IdentityTokenVerifier(policy: F.applePolicy(), keys: cache)
                #expect(await verifier.failureCode(token) == "provider_unavailable", "\(label)")
            }
            // An odd key beside a good one is skipped; the good one serves.
            let good = try #require(try JSONSerialization.jsonObject(with: apple.jwksJSON()) as? [String: Any])
            let goodKey = try #require((good["keys"] as? [Any])?.first)
            let mixed = try JSONSerialization.data(withJSONObject: ["keys": [["kty": "RSA", "kid": 5, "n": [1], "e": 1e300], goodKey]])
            apple.keysFault = .answer(status: 200, body: mixed)
            let cache = JWKSCache(source: .url(baseURL + "/auth/keys"), logger: F.logger)
            try await cache.refresh()
            #expect(await cache.knownKeyIDs == [apple.currentKeyID])
        }
    }

    @Test func aKeySetTricklingInIsCutOffAtTheFetchTimeout() async throws {
        try await MockAppleServer.with { apple, baseURL in
            apple.keysFault = .slowBody
            let cache = JWKSCache(source: .url(baseURL + "/auth/keys"), logger: F.logger, fetchTimeout: .seconds(2))
            let started = ContinuousClock.now
            // The fetch timeout cut it off (the error names the limit that fired), long before
            // the body (hundreds of bytes at one a second) could have arrived: 2.01 s alone.
            // scripts/test.sh runs this suite after the rest (under the whole suite on two cores
            // the waiting task was resumed late: 3.6 s seen).
            let error = await #expect(throws: DeadlineExceeded.self) { try await cache.refresh() }
            let took = ContinuousClock.now - started
            print("key set trickling in: fetch failed after \(took)")
            #expect(error?.timeout == .seconds(2))
            #expect(took < .seconds(3), "took \(took)")
            #expect(!cache.isUsable)
        }
    }

    @Test func fetchFailuresAreLoggedOnceAMinuteSayingWhetherKeysAreCached() async throws {
        try await MockAppleServer.with { apple, baseURL in
            let capture = LogCapture()
            let clock = ManualClock()
            let cache = JWKSCache(
                source: .url(baseURL + "/auth/keys"), logger: capture.logger, now: { clock.now })
            func failures() -> [LogCapture.Line] { capture.lines.filter { $0.level == .warning } }

            apple.keysFault = .unavailable
            for _ in 0..<5 { _ = try? await cache.refresh() }
            #expect(failures().count == 1)
            #expect(failures().last?.message == "key set fetch failed; no keys are cached")
            #expect(failures().last?.metadata["cached_keys"] == "0")

            clock.advance(by: .seconds(59))
            _ = try? await cache.refresh()
            #expect(failures().count == 1)
            clock.advance(by: .seconds(2))
            _ = try? await cache.refresh()
            #expect(failures().count == 2)
            #expect(failures().last?.metadata["failures_not_logged"] == "5")

            apple.keysFault = .none
            try await cache.refresh()
            apple.keysFault = .unavailable
            clock.advance(by: .seconds(61))
            _ = try? await cache.refresh()
            #expect(failures().count == 3)
            #expect(failures().last?.message == "key set fetch failed; serving the 1 cached keys")
            #expect(failures().last?.metadata["cached_keys"] == "1")
        }
    }
}

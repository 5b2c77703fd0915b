import BrokerCore
import Foundation
import JWTKit
import MockIdP
import Testing

@testable import Providers

/// Tokens that are not a well-formed compact JWS with unique JSON members: `invalid_token`,
/// refused before any key is looked up.
@Suite struct MalformedTokenTests {
    typealias F = VerifierFixture

    /// A correctly signed token from hand-written header and payload texts.
    func rawToken(_ apple: MockAppleIdP, header: String? = nil, payload: String? = nil) throws -> String {
        try apple.mint(
            rawHeader: Data((header ?? F.json(F.header(apple))).utf8), rawPayload: Data((payload ?? F.json(F.claims(apple))).utf8))
    }

    @Test func aHandWrittenTokenWithoutDuplicatesVerifies() async throws {
        // Control for the raw-JSON cases below: the raw minting path itself produces good tokens.
        let apple = try F.apple()
        let verifier = try F.verifier(for: apple)
        #expect(await verifier.failureCode(try rawToken(apple)) == nil)
        // An escaped member name that duplicates nothing is fine.
        let payload = try F.json(F.claims(apple)).replacingOccurrences(of: "{", with: #"{"x\u0041":1,"#, options: .anchored)
        #expect(await verifier.failureCode(try rawToken(apple, payload: payload)) == nil)
    }

    @Test func twoSegmentsAreRefused() async throws {
        let apple = try F.apple()
        let parts = try apple.mint(F.claims(apple)).split(separator: ".")
        let verifier = try F.verifier(for: apple)
        #expect(await verifier.failureCode("\(parts[0]).\(parts[1])") == "invalid_token")
        #expect(await verifier.failedCheck("\(parts[0]).\(parts[1])") == "structure")
        #expect(await verifier.failureCode("\(parts[0]).\(parts[1]).\(parts[2]).\(parts[2])") == "invalid_token")
        #expect(await verifier.failureCode(String(parts[0])) == "invalid_token")
        #expect(await verifier.failureCode("") == "invalid_token")
    }

    @Test func anEmptySegmentIsRefused() async throws {
        let apple = try F.apple()
        let parts = try apple.mint(F.claims(apple)).split(separator: ".")
        let verifier = try F.verifier(for: apple)
        for token in ["\(parts[0]).\(parts[1]).", "\(parts[0])..\(parts[2])", ".\(parts[1]).\(parts[2])", ".."] {
            #expect(await verifier.failureCode(token) == "invalid_token", "\(token.prefix(20))")
            #expect(await verifier.failedCheck(token) == "structure")
        }
    }

    /// The same bytes spelled another way (padding, the standard alphabet, set unused bits):
    /// a lenient decoder accepts each spelling, so each would be a new token for the replay
    /// cache. Only the canonical text verifies.
    @Test func aNonCanonicalSpellingOfAGoodTokenIsRefused() async throws {
        let apple = try F.apple()
        let verifier = try F.verifier(for: apple)
        var token = try apple.mint(F.claims(apple))
        // Mint until the signature has a URL-safe character and a length that needs padding.
        while !(token.split(separator: ".")[2].contains { $0 == "-" || $0 == "_" }) { token = try apple.mint(F.claims(apple)) }
        #expect(await verifier.failureCode(token) == nil)
        let parts = token.split(separator: ".").map(String.init)
        var spellings: [String] = []
        for index in 0..<3 where parts[index].count % 4 != 0 {
            var padded = parts
            padded[index] += String(repeating: "=", count: 4 - parts[index].count % 4)
            spellings.append(padded.joined(separator: "."))
        }
        var standard = parts
        standard[2] = standard[2].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        spellings.append(standard.joined(separator: "."))
        #expect(!spellings.isEmpty)
        for spelling in spellings {
            #expect(await verifier.failureCode(spelling) == "invalid_token", "\(spelling.suffix(12))")
            #expect(await verifier.failedCheck(spelling) == "structure")
        }
    }

    @Test func aNonBase64SegmentIsRefused() async throws {
        let apple = try F.apple()
        let parts = try apple.mint(F.claims(apple)).split(separator: ".").map(String.init)
        let verifier = try F.verifier(for: apple)
        for bad in ["***", "eyJ hbGc", "e", "%7B%7D", "ab$d"] {
            for index in 0..<3 {
                var broken = parts
                broken[index] = bad
                let token = broken.joined(separator: ".")
                #expect(await verifier.failureCode(token) == "invalid_token", "segment \(index) = \(bad)")
                #expect(await verifier.failedCheck(token) == "structure", "segment \(index) = \(bad)")
            }
        }
    }

    @Test func aHeaderThatIsNotJSONIsRefused() async throws {
        let apple = try F.apple()
        let verifier = try F.verifier(for: apple)
        for header in ["not json", "[\"RS256\"]", "\"RS256\"", "{\"alg\":\"RS256\",", "{\"alg\":\"RS256\"} trailing", ""] {
            let token = try rawToken(apple, header: header)
            #expect(await verifier.failureCode(token) == "invalid_token", "header \(header)")
        }
        let payloadToken = try rawToken(apple, payload: "{\"sub\":")
        #expect(await verifier.failureCode(payloadToken) == "invalid_token")
        #expect(await verifier.failureCode(try rawToken(apple, payload: "[]")) == "invalid_token")
    }

    @Test func numbersThatAreNotJSONAreRefused() async throws {
        // Swift's Double parser takes "nan" or "0x10"; the token parser checks JSON's number
        // grammar first and refuses these.
        let apple = try F.apple()
        let verifier = try F.verifier(for: apple)
        for number in ["nan", "NaN", "inf", "Infinity", "0x10", "+1", ".5", "1."] {
            let payload = try F.json(F.claims(apple)).replacingOccurrences(of: "{", with: #"{"x":\#(number),"#, options: .anchored)
            #expect(await verifier.failureCode(try rawToken(apple, payload: payload)) == "invalid_token", "\(number)")
        }
    }

    @Test func aDuplicateMemberInThePayloadIsRefused() async throws {
        let apple = try F.apple()
        let verifier = try F.verifier(for: apple)
        let payload = try F.json(F.claims(apple)).replacingOccurrences(of: "{", with: #"{"sub":"attacker","#, options: .anchored)
        #expect(payload.components(separatedBy: "\"sub\"").count == 3)
        let token = try rawToken(apple, payload: payload)
        #expect(await verifier.failureCode(token) == "invalid_token")
        #expect(await verifier.failedCheck(token) == "structure")
        // Also a duplicate aud, and a duplicate inside a nested object.
        let aud = try F.json(F.claims(apple)).replacingOccurrences(
            of: "}", with: #","aud":"com.attacker.app"}"#, options: [.anchored, .backwards])
        #expect(await verifier.failureCode(try rawToken(apple, payload: aud)) == "invalid_token")
        let nested = try F.json(F.claims(apple)).replacingOccurrences(of: "{", with: #"{"x":{"a":1,"a":2},"#, options: .anchored)
        #expect(await verifier.failureCode(try rawToken(apple, payload: nested)) == "invalid_token")
    }

    @Test func aDuplicateMemberInTheHeaderIsRefused() async throws {
        let apple = try F.apple()
        let verifier = try F.verifier(for: apple)
        let kid = apple.currentKeyID
        for header in [
            #"{"alg":"RS256","kid":"\#(kid)","kid":"\#(kid)"}"#,
            #"{"alg":"none","alg":"RS256","kid":"\#(kid)"}"#,
            #"{"alg":"RS256","alg":"RS256","kid":"\#(kid)"}"#,
        ] {
            let token = try rawToken(apple, header: header)
            #expect(await verifier.failureCode(token) == "invalid_token", "\(header)")
            #expect(await verifier.failedCheck(token) == "structure", "\(header)")
        }
    }

    @Test func aDuplicateHiddenBehindAnEscapeIsRefused() async throws {
        let apple = try F.apple()
        let verifier = try F.verifier(for: apple)
        let payload = try F.json(F.claims(apple)).replacingOccurrences(of: "{", with: #"{"s\u0075b":"attacker","#, options: .anchored)
        let token = try rawToken(apple, payload: payload)
        #expect(await verifier.failureCode(token) == "invalid_token")
        #expect(await verifier.failedCheck(token) == "structure")
        let header = #"{"alg":"RS256","kid":"\#(apple.currentKeyID)","\u006bid":"other"}"#
        #expect(await verifier.failureCode(try rawToken(apple, header: header)) == "invalid_token")
        let escapedSlash = try F.json(F.claims(apple)).replacingOccurrences(
            of: "{", with: #"{"\u0069ss":"https:\/\/appleid.apple.com","#, options: .anchored)
        #expect(await verifier.failureCode(try rawToken(apple, payload: escapedSlash)) == "invalid_token")
    }

    @Test func anOversizedTokenIsRefused() async throws {
        let apple = try F.apple()
        let verifier = try F.verifier(for: apple)
        let big = try apple.mint(F.claims(apple, extra: ["padding": .string(String(repeating: "a", count: 20_000))]))
        #expect(big.utf8.count > verifier.policy.maxTokenBytes)
        #expect(await verifier.failureCode(big) == "invalid_token")
        #expect(await verifier.failedCheck(big) == "size")
        let report = await verifier.check(big, nonce: .none, at: F.now)
        #expect(report.checks.count == 1)

        // The cap is the policy's: a normal token over a small cap is refused, at the cap accepted.
        let token = try apple.mint(F.claims(apple))
        let tight = try F.verifier(for: apple, policy: F.applePolicy(maxTokenBytes: token.utf8.count - 1))
        #expect(await tight.failureCode(token) == "invalid_token")
        #expect(await tight.failedCheck(token) == "size")
        let exact = try F.verifier(for: apple, policy: F.applePolicy(maxTokenBytes: token.utf8.count))
        #expect(await exact.failureCode(token) == nil)
    }

    @Test func structuralRefusalsComeBeforeTheKeyLookup() async throws {
        // Structural refusals come before the key lookup: an empty key set gives the same code.
        let cache = JWKSCache(source: .fixed(Data(#"{"keys":[]}"#.utf8)), logger: F.logger)
        let verifier = IdentityTokenVerifier(policy: F.applePolicy(), keys: cache)
        #expect(await verifier.failureCode("a.b") == "invalid_token")
        #expect(await cache.knownKeyIDs.isEmpty)
        let apple = try F.apple()
        // A well-formed token meets the key lookup, and an empty set is no usable key set.
        #expect(await verifier.failureCode(try apple.mint(F.claims(apple))) == "provider_unavailable")
    }

    /// `iat`, `exp` and `nbf` outside years 0001 to 9999 are no times: refused as invalid, never
    /// converted (issue 39 C9: no number from outside may trap, and PostgresNIO traps binding a
    /// date whose microseconds do not fit an `Int64`).
    @Test(arguments: ["1e300", "-1e300", "1.8e18", "253402300800"])
    func timesNoInstantCanBeAreRefused(_ time: String) async throws {
        let apple = try F.apple()
        let verifier = try F.verifier(for: apple)
        let good = try F.json(F.claims(apple))
        for claim in ["iat", "exp"] {
            let payload = try #require(
                good.range(of: #""\#(claim)":[0-9.e+]+"#, options: .regularExpression).map {
                    good.replacingCharacters(in: $0, with: #""\#(claim)":\#(time)"#)
                })
            let failed = await verifier.failedCheck(try rawToken(apple, payload: payload))
            #expect(failed == claim, "\(claim) \(time): \(String(describing: failed)) \(payload)")
        }
        let notBefore = good.replacingOccurrences(of: "{", with: #"{"nbf":\#(time),"#, options: .anchored)
        if time.hasPrefix("-") {
            #expect(await verifier.failedCheck(try rawToken(apple, payload: notBefore)) == "nbf", "nbf \(time)")
        }
    }
}

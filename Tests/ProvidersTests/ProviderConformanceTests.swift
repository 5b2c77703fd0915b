import BrokerCore
import Foundation
import JWTKit
import MockIdP
import TestSupport
import Testing

@testable import Providers

extension ProviderID {
    /// The descriptor of the built-in type this reserved id names (the tests here name only
    /// `apple`, `google` and `facebook`).
    var builtInDescriptor: ProviderDescriptor {
        switch reservedType {
        case .apple?: AppleProvider.descriptor
        case .google?: GoogleProvider.descriptor
        default: FacebookProvider.descriptor
        }
    }
}

/// One provider under the conformance battery: its own policy (the function its sign-in and
/// `broker token verify` use) and the claims of a token it would issue.
struct ConformanceCase: Sendable, CustomTestStringConvertible {
    let provider: ProviderID
    let issuer: String
    let audience: String
    /// The nonce as the token carries it, for the raw nonce the app generated.
    let tokenNonce: @Sendable (String) -> String
    let nonceMode: NonceMode

    var testDescription: String { provider.rawValue }

    static let all: [ConformanceCase] = [
        ConformanceCase(
            provider: .apple, issuer: "https://appleid.apple.com", audience: "com.example.broker.app",
            tokenNonce: { VerifierFixture.sha256Hex($0) }, nonceMode: .sha256),
        ConformanceCase(
            provider: .google, issuer: "https://accounts.google.com", audience: "1234-web.apps.googleusercontent.com",
            tokenNonce: { $0 }, nonceMode: .raw),
        ConformanceCase(
            provider: .facebook, issuer: "https://www.facebook.com", audience: "1234567890", tokenNonce: { $0 }, nonceMode: .raw),
    ]

    func options(nonce: String? = nil, audiences: Set<String>? = nil) -> TokenCheckOptions {
        TokenCheckOptions(audiences: audiences ?? [audience], rawNonce: nonce, nonceMode: nonceMode)
    }

    /// The verifier this provider's sign-in builds, over a fixed key set.
    func verifier(_ signer: MockAppleIdP, nonce: String? = nil, audiences: Set<String>? = nil) throws
        -> (IdentityTokenVerifier, NonceExpectation)
    {
        let (policy, expectation) = provider.builtInDescriptor.tokenPolicy(nil, options(nonce: nonce, audiences: audiences))
        let keys = JWKSCache(source: .fixed(try signer.jwksJSON()), logger: VerifierFixture.logger)
        return (IdentityTokenVerifier(policy: policy, keys: keys), expectation)
    }

    /// Claims of a valid token of this provider, issued at the fixed clock.
    func claims(nonce: String? = nil, issuedAt: Date = VerifierFixture.now, lifetime: TimeInterval = 600)
        -> [String: JWTHeaderField]
    {
        var claims: [String: JWTHeaderField] = [
            "iss": .string(issuer), "aud": .string(audience), "sub": .string("10769150350006150715113082367"),
            "iat": .int(Int(issuedAt.timeIntervalSince1970)), "exp": .int(Int(issuedAt.timeIntervalSince1970 + lifetime)),
            "email": .string("person@example.com"),
        ]
        if let nonce { claims["nonce"] = .string(tokenNonce(nonce)) }
        if provider == .facebook { claims["jti"] = .string(UUID().uuidString) }
        return claims
    }
}

/// The RFC 8725 / OpenID RP verifier cases (decision 0008), run for Apple, Google
/// and Facebook Limited Login through each provider's own policy. A signer from MockIdP signs
/// every token (the keys are RSA keys like the providers'; the claims are each provider's).
@Suite struct ProviderConformanceTests {
    typealias F = VerifierFixture
    static let cases = ConformanceCase.all

    /// The verifier's code for a token minted from `claims` (after `change`), nil when it verifies.
    func code(
        _ c: ConformanceCase, nonce: String? = nil, at now: Date = F.now, header: [String: JWTHeaderField] = [:],
        forgery: TokenForgery = .valid, _ change: (inout [String: JWTHeaderField]) -> Void = { _ in }
    ) async throws -> String? {
        let signer = try F.apple()
        var claims = c.claims(nonce: nonce)
        change(&claims)
        let (verifier, expectation) = try c.verifier(signer, nonce: nonce)
        let token = try signer.mint(claims, header: header, forgery: forgery)
        return await verifier.failureCode(token, nonce: expectation, at: now)
    }

    @Test(arguments: cases) func aValidTokenVerifies(_ c: ConformanceCase) async throws {
        #expect(try await code(c) == nil)
        #expect(try await code(c, nonce: "raw-nonce-123") == nil)
    }

    @Test(arguments: cases) func algNoneHS256WithThePublicKeyAndUnknownAlgorithmsAreRefused(_ c: ConformanceCase) async throws {
        #expect(try await code(c, forgery: .hs256WithPublicKey) == "invalid_token")
        for alg: JWTHeaderField in [.string("none"), .string("RS512"), .string("ES256"), .string("rs256"), .null] {
            #expect(try await code(c, header: ["alg": alg]) == "invalid_token", "alg \(alg)")
        }
        let signer = try F.apple()
        let (verifier, _) = try c.verifier(signer)
        let none = try signer.mint(c.claims(), forgery: .algNone) + "c2ln"
        #expect(await verifier.failedCheck(none) == "alg")
    }

    @Test(arguments: cases) func aMissingOrUnknownKidIsRefused(_ c: ConformanceCase) async throws {
        #expect(try await code(c, forgery: .unpublishedKey) == "unknown_key")
        for kid: JWTHeaderField in [.null, .string(""), .int(7)] {
            #expect(try await code(c, header: ["kid": kid]) == "invalid_token", "kid \(kid)")
        }
    }

    @Test(arguments: cases) func anUnknownKidRefetchesOnceWithinTheInterval(_ c: ConformanceCase) async throws {
        try await MockAppleServer.with { signer, baseURL in
            // What is counted here is refetches, not time: a fetch may take as long as the loaded
            // test machine needs (the whole suite at once has made a loopback fetch exceed 5 s).
            let cache = JWKSCache(
                source: .url(baseURL + "/auth/keys"), logger: F.logger, minimumRefetchInterval: .seconds(3_600),
                fetchTimeout: .seconds(60))
            let (policy, nonce) = c.provider.builtInDescriptor.tokenPolicy(nil, c.options())
            let verifier = IdentityTokenVerifier(policy: policy, keys: cache)
            let first = await verifier.failureCode(try signer.mint(c.claims()))
            let fetchError = await cache.lastError
            #expect(first == nil, "\(fetchError ?? "")")
            let (kid, publish) = try signer.rotateKeysUnpublished()
            let token = try signer.mint(c.claims())
            #expect(await verifier.failureCode(token, nonce: nonce) == "unknown_key")  // one refetch, key not there yet
            publish()
            #expect(await verifier.failureCode(token, nonce: nonce) == "unknown_key")  // no second refetch inside the interval
            #expect(await !cache.knownKeyIDs.contains(kid))
        }
    }

    @Test(arguments: cases) func keyChoosingAndCriticalHeadersAreRefused(_ c: ConformanceCase) async throws {
        let headers: [(String, JWTHeaderField)] = [
            ("jku", .string("https://attacker.example/keys")), ("x5u", .string("https://attacker.example/cert.pem")),
            ("jwk", .object(["kty": .string("RSA"), "n": .string("AQAB"), "e": .string("AQAB")])),
            ("x5c", .array([.string("MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA")])), ("crit", .array([.string("exp")])),
        ]
        for (name, value) in headers {
            #expect(try await code(c, header: [name: value]) == "invalid_token", "\(name)")
        }
    }

    @Test(arguments: cases) func aBadSignatureIsRefused(_ c: ConformanceCase) async throws {
        #expect(try await code(c, forgery: .badSignature) == "invalid_token")
    }

    @Test(arguments: cases) func theIssuerMustBeTheProvidersExactly(_ c: ConformanceCase) async throws {
        #expect(try await code(c) { $0["iss"] = .string(c.issuer + "/") } == "issuer_mismatch")
        #expect(try await code(c) { $0["iss"] = .string("https://evil.example") } == "issuer_mismatch")
        #expect(try await code(c) { $0["iss"] = nil } == "issuer_mismatch")
        let others = ConformanceCase.all.filter { $0.provider != c.provider }.map(\.issuer)
        for other in others { #expect(try await code(c) { $0["iss"] = .string(other) } == "issuer_mismatch", "\(other)") }
        // Google writes its issuer in two forms; both are Google's.
        let bare = try await code(c) { $0["iss"] = .string("accounts.google.com") }
        #expect(bare == (c.provider == .google ? nil : "issuer_mismatch"))
    }

    @Test(arguments: cases) func theAudienceAsStringOrArrayMustBeOursAndOnlyOurs(_ c: ConformanceCase) async throws {
        #expect(try await code(c) { $0["aud"] = .array([.string(c.audience)]) } == nil)
        #expect(try await code(c) { $0["aud"] = .string("someone.else") } == "audience_mismatch")
        #expect(try await code(c) { $0["aud"] = .array([.string(c.audience), .string("untrusted")]) } == "audience_mismatch")
        #expect(try await code(c) { $0["aud"] = .array([]) } == "audience_mismatch")
        #expect(try await code(c) { $0["aud"] = nil } == "audience_mismatch")
    }

    @Test(arguments: cases) func anAuthorizedPartyMustBeAClientOfTheTenant(_ c: ConformanceCase) async throws {
        #expect(try await code(c) { $0["azp"] = .string(c.audience) } == nil)
        #expect(try await code(c) { $0["azp"] = .string("another.client") } == "audience_mismatch")
        #expect(try await code(c) { $0["azp"] = .int(1) } == "audience_mismatch")
    }

    @Test(arguments: cases) func expiryIssueAndNotBeforeTimesHaveASixtySecondSkew(_ c: ConformanceCase) async throws {
        let now = F.now.timeIntervalSince1970
        #expect(try await code(c, at: F.now.addingTimeInterval(600 + 59)) == nil)
        #expect(try await code(c, at: F.now.addingTimeInterval(600 + 61)) == "token_expired")
        #expect(try await code(c) { $0["iat"] = .int(Int(now) + 59) } == nil)
        #expect(try await code(c) { $0["iat"] = .int(Int(now) + 61) } == "token_not_yet_valid")
        #expect(try await code(c) { $0["nbf"] = .int(Int(now) + 59) } == nil)
        #expect(try await code(c) { $0["nbf"] = .int(Int(now) + 61) } == "token_not_yet_valid")
        #expect(try await code(c) { $0["exp"] = nil } == "invalid_token")
        #expect(try await code(c) { $0["iat"] = nil } == "invalid_token")
        #expect(try await code(c) { $0["sub"] = nil } == "invalid_token")
    }

    @Test(arguments: cases) func theNonceMustMatchWhenOneIsSent(_ c: ConformanceCase) async throws {
        #expect(try await code(c, nonce: "the-raw-nonce") == nil)
        #expect(try await code(c, nonce: "the-raw-nonce") { $0["nonce"] = .string(c.tokenNonce("another-nonce")) } == "nonce_mismatch")
        #expect(try await code(c, nonce: "the-raw-nonce") { $0["nonce"] = nil } == "nonce_mismatch")
    }

    @Test(arguments: cases) func anOversizedTokenIsRefusedUnread(_ c: ConformanceCase) async throws {
        #expect(try await code(c) { $0["padding"] = .string(String(repeating: "x", count: 20_000)) } == "invalid_token")
    }

    @Test(arguments: cases) func duplicateMembersAndMalformedSegmentsAreRefused(_ c: ConformanceCase) async throws {
        let signer = try F.apple()
        let (verifier, _) = try c.verifier(signer)
        let header = try F.json(F.header(signer))
        var payload = try F.json(c.claims())
        payload.removeLast()
        payload += ",\"sub\":\"someone-else\"}"
        let duplicate = try signer.mint(rawHeader: Data(header.utf8), rawPayload: Data(payload.utf8))
        #expect(await verifier.failedCheck(duplicate) == "structure")
        let valid = try signer.mint(c.claims())
        let parts = valid.split(separator: ".").map(String.init)
        for malformed in [parts[0] + "." + parts[1], parts.joined(separator: ".") + ".x", "!!." + parts[1] + "." + parts[2], "..", ""] {
            #expect(await verifier.failureCode(malformed) == "invalid_token", "\(malformed.prefix(20))")
        }
    }
}

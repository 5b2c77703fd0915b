import AsyncHTTPClient
import BrokerCore
import Foundation
import Hummingbird
import JWTKit
import Logging
import MockIdP
import TestSupport
import Testing

@testable import Providers

/// The RFC 8725 / OpenID RP verifier cases of ``ProviderConformanceTests`` run against the
/// generic OpenID Connect type's own policy, `OIDCSettings(...).policy(options)` (what its
/// sign-in and `broker token verify --tenant` use), with a ``MockOIDCIssuer``'s key set: a
/// single-tenant issuer (LINE's shape) and a `{tid}` one (Entra's). And every registered type
/// has its battery.
@Suite struct OIDCConformanceTests {
    typealias F = VerifierFixture

    /// One OIDC configuration under the battery.
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        /// The configured issuer (a `{tid}` template for Entra's shape).
        let issuer: String
        /// The `iss` of a valid token.
        let tokenIssuer: String
        let tid: String?
        let audience = "1657000001"

        var testDescription: String { name }

        var settings: OIDCSettings {
            OIDCSettings(issuer: issuer, discoveredAlgorithms: ["RS256", "ES256"])
        }

        func claims(nonce: String? = nil, issuedAt: Date = F.now, lifetime: TimeInterval = 600) -> [String: JWTHeaderField] {
            var claims: [String: JWTHeaderField] = [
                "iss": .string(tokenIssuer), "aud": .string(audience), "sub": .string("U4af4980629"),
                "iat": .int(Int(issuedAt.timeIntervalSince1970)), "exp": .int(Int(issuedAt.timeIntervalSince1970 + lifetime)),
                "email": .string("person@example.com"),
            ]
            if let tid { claims["tid"] = .string(tid) }
            if let nonce { claims["nonce"] = .string(nonce) }
            return claims
        }
    }

    static let tenant = "3c9a1f52-7d4e-4b8a-9f60-1e2d3c4b5a69"
    static let cases = [
        Case(name: "single-tenant", issuer: "https://access.line.me", tokenIssuer: "https://access.line.me", tid: nil),
        Case(
            name: "multi-tenant", issuer: "https://login.microsoftonline.com/{tid}/v2.0",
            tokenIssuer: "https://login.microsoftonline.com/\(tenant)/v2.0", tid: tenant),
    ]

    /// One issuer for every test that only mints (RSA key generation is the slow part).
    private static let shared = Result { try MockOIDCIssuer(name: "conformance") }
    static func signer() throws -> MockOIDCIssuer { try shared.get() }

    func verifier(_ c: Case, nonce: String? = nil, settings: OIDCSettings? = nil) throws -> (IdentityTokenVerifier, NonceExpectation) {
        let (policy, expectation) = (settings ?? c.settings).policy(
            TokenCheckOptions(audiences: [c.audience], rawNonce: nonce, authorizedParties: [c.audience]))
        let keys = JWKSCache(source: .fixed(try Self.signer().jwksJSON()), logger: F.logger)
        return (IdentityTokenVerifier(policy: policy, keys: keys), expectation)
    }

    func code(
        _ c: Case, nonce: String? = nil, at now: Date = F.now, algorithm: MockOIDCIssuer.Algorithm? = nil,
        header: [String: JWTHeaderField] = [:], forgery: TokenForgery = .valid, settings: OIDCSettings? = nil,
        _ change: (inout [String: JWTHeaderField]) -> Void = { _ in }
    ) async throws -> String? {
        var claims = c.claims(nonce: nonce)
        change(&claims)
        let (verifier, expectation) = try verifier(c, nonce: nonce, settings: settings)
        let token = try Self.signer().mint(claims, algorithm: algorithm, header: header, forgery: forgery)
        return await verifier.failureCode(token, nonce: expectation, at: now)
    }

    @Test func theDescriptorsPolicyIsTheSettingsPolicy() throws {
        let c = Self.cases[0]
        let configuration = ProviderConfiguration(
            tenantID: UUID(), provider: try #require(ProviderID(rawValue: "line")), type: .oidc, platforms: [], clientIDs: [c.audience],
            settings: c.settings.json)
        let options = TokenCheckOptions(audiences: [c.audience])
        let (fromDescriptor, _) = OIDCProvider.descriptor.tokenPolicy(configuration, options)
        let (fromSettings, _) = c.settings.policy(options)
        #expect(fromDescriptor.issuers == fromSettings.issuers)
        #expect(fromDescriptor.algorithms == fromSettings.algorithms)
        #expect(fromDescriptor.audiences == fromSettings.audiences)
        // Without a tenant's settings nothing verifies.
        let (none, _) = OIDCProvider.descriptor.tokenPolicy(nil, options)
        #expect(none.issuers.isEmpty && none.algorithms.isEmpty)
    }

    @Test(arguments: cases) func aValidTokenVerifiesWithEachAcceptedAlgorithm(_ c: Case) async throws {
        #expect(try await code(c) == nil)
        #expect(try await code(c, algorithm: .es256) == nil)
        #expect(try await code(c, nonce: "raw-nonce-123") == nil)
    }

    @Test(arguments: cases) func algNoneHS256WithThePublicKeyAndUnacceptedAlgorithmsAreRefused(_ c: Case) async throws {
        #expect(try await code(c, forgery: .hs256WithPublicKey) == "invalid_token")
        #expect(try await code(c, forgery: .algNone) == "invalid_token")
        for alg: JWTHeaderField in [.string("none"), .string("HS256"), .string("RS512"), .string("rs256"), .null] {
            #expect(try await code(c, header: ["alg": alg]) == "invalid_token", "alg \(alg)")
        }
        // Narrowed to ES256 (--algorithms): an RS256 token is refused, an ES256 one accepted.
        var narrowed = c.settings
        narrowed.algorithms = ["ES256"]
        #expect(try await code(c, settings: narrowed) == "invalid_token")
        #expect(try await code(c, algorithm: .es256, settings: narrowed) == nil)
        let (verifier, _) = try verifier(c)
        let none = try Self.signer().mint(c.claims(), forgery: .algNone) + "c2ln"
        #expect(await verifier.failedCheck(none) == "alg")
    }

    @Test(arguments: cases) func aMissingOrUnknownKidIsRefused(_ c: Case) async throws {
        #expect(try await code(c, forgery: .unpublishedKey) == "unknown_key")
        for kid: JWTHeaderField in [.null, .string(""), .int(7)] {
            #expect(try await code(c, header: ["kid": kid]) == "invalid_token", "kid \(kid)")
        }
        // The ES256 key's kid on an RS256 header: the key cannot verify it.
        let esKid = try #require(try Self.signer().currentKeyID(.es256))
        #expect(try await code(c, header: ["kid": .string(esKid)]) != nil)
    }

    @Test(arguments: cases) func anUnknownKidRefetchesAtMostOncePerInterval(_ c: Case) async throws {
        let issuer = try MockOIDCIssuer(name: "rotating")
        try await ServedApplication.with({ listening in
            MockIdPServer.application(apple: nil, google: nil, facebook: nil, oidc: [issuer], port: 0) { listening($0) }
        }) { port in
            let url = issuer.jwksURL(base: "http://127.0.0.1:\(port)")
            let (policy, nonce) = c.settings.policy(TokenCheckOptions(audiences: [c.audience]))

            // Inside the interval since the last fetch: an unknown kid fetches nothing, even once
            // the key is published (anyone can send an unknown kid).
            // What is counted here is fetches, not time: a fetch may take as long as the loaded
            // test machine needs (the whole suite at once has made a loopback fetch exceed 5 s).
            let limited = IdentityTokenVerifier(
                policy: policy,
                keys: JWKSCache(source: .url(url), logger: F.logger, minimumRefetchInterval: .seconds(3_600), fetchTimeout: .seconds(60)))
            let first = await limited.failureCode(try issuer.mint(c.claims()))
            let fetchError = await limited.keys.lastError
            #expect(first == nil, "\(fetchError ?? "")")
            #expect(issuer.keyFetches == 1)
            let kid = try issuer.rotate(.rs256, publish: false)
            let token = try issuer.mint(c.claims())
            #expect(await limited.failureCode(token, nonce: nonce) == "unknown_key")
            issuer.publish(kid: kid)
            #expect(await limited.failureCode(token, nonce: nonce) == "unknown_key")
            #expect(issuer.keyFetches == 1)
            #expect(await !limited.keys.knownKeyIDs.contains(kid))

            // Past the interval (none here): the unknown kid makes one refetch, which finds it.
            let open = IdentityTokenVerifier(
                policy: policy,
                keys: JWKSCache(source: .url(url), logger: F.logger, minimumRefetchInterval: .zero, fetchTimeout: .seconds(60)))
            #expect(await open.failureCode(try issuer.mint(c.claims(), algorithm: .es256)) == nil)
            #expect(issuer.keyFetches == 2)
            let newer = try issuer.rotate(.rs256)
            #expect(await open.failureCode(try issuer.mint(c.claims()), nonce: nonce) == nil)
            #expect(issuer.keyFetches == 3)
            #expect(await open.keys.knownKeyIDs.contains(newer))
            // A kid still unpublished after the refetch is refused.
            _ = try issuer.rotate(.rs256, publish: false)
            #expect(await open.failureCode(try issuer.mint(c.claims()), nonce: nonce) == "unknown_key")
            #expect(issuer.keyFetches == 4)
        }
    }

    @Test(arguments: cases) func keyChoosingAndCriticalHeadersAreRefused(_ c: Case) async throws {
        let headers: [(String, JWTHeaderField)] = [
            ("jku", .string("https://attacker.example/keys")), ("x5u", .string("https://attacker.example/cert.pem")),
            ("jwk", .object(["kty": .string("RSA"), "n": .string("AQAB"), "e": .string("AQAB")])),
            ("x5c", .array([.string("MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA")])), ("crit", .array([.string("exp")])),
        ]
        for (name, value) in headers {
            #expect(try await code(c, header: [name: value]) == "invalid_token", "\(name)")
        }
    }

    @Test(arguments: cases) func aBadSignatureIsRefused(_ c: Case) async throws {
        #expect(try await code(c, forgery: .badSignature) == "invalid_token")
        #expect(try await code(c, algorithm: .es256, forgery: .badSignature) == "invalid_token")
    }

    @Test(arguments: cases) func theIssuerMustBeTheConfiguredOneExactly(_ c: Case) async throws {
        #expect(try await code(c) { $0["iss"] = .string(c.tokenIssuer + "/") } == "issuer_mismatch")
        #expect(try await code(c) { $0["iss"] = .string("https://evil.example") } == "issuer_mismatch")
        #expect(try await code(c) { $0["iss"] = nil } == "issuer_mismatch")
        for other in ["https://accounts.google.com", "https://appleid.apple.com", "https://www.facebook.com"] {
            #expect(try await code(c) { $0["iss"] = .string(other) } == "issuer_mismatch", "\(other)")
        }
        if c.tid != nil {
            // The template itself, another tenant's issuer, a tid that is no tenant id, no tid.
            #expect(try await code(c) { $0["iss"] = .string(c.issuer) } == "issuer_mismatch")
            #expect(try await code(c) { $0["tid"] = .string("77777777-1111-4222-8333-444444444444") } == "issuer_mismatch")
            #expect(try await code(c) { $0["tid"] = .string("x/../y") } == "issuer_mismatch")
            #expect(try await code(c) { $0["tid"] = nil } == "issuer_mismatch")
            // Allowed tenants: another one's token is refused even with its own issuer.
            var allowed = c.settings
            allowed.allowedTenantIDs = ["77777777-1111-4222-8333-444444444444"]
            #expect(try await code(c, settings: allowed) == "tenant_not_allowed")
            allowed.allowedTenantIDs = [Self.tenant]
            #expect(try await code(c, settings: allowed) == nil)
        }
    }

    @Test(arguments: cases) func theAudienceAsStringOrArrayMustBeOursAndOnlyOurs(_ c: Case) async throws {
        #expect(try await code(c) { $0["aud"] = .array([.string(c.audience)]) } == nil)
        #expect(try await code(c) { $0["aud"] = .string("someone.else") } == "audience_mismatch")
        #expect(try await code(c) { $0["aud"] = .array([.string(c.audience), .string("untrusted")]) } == "audience_mismatch")
        #expect(try await code(c) { $0["aud"] = .array([]) } == "audience_mismatch")
        #expect(try await code(c) { $0["aud"] = nil } == "audience_mismatch")
    }

    @Test(arguments: cases) func anAuthorizedPartyMustBeAClientOfTheTenant(_ c: Case) async throws {
        #expect(try await code(c) { $0["azp"] = .string(c.audience) } == nil)
        #expect(try await code(c) { $0["azp"] = .string("another.client") } == "audience_mismatch")
        #expect(try await code(c) { $0["azp"] = .int(1) } == "audience_mismatch")
    }

    @Test(arguments: cases) func expiryIssueAndNotBeforeTimesHaveASixtySecondSkew(_ c: Case) async throws {
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

    @Test(arguments: cases) func theNonceMustMatchWhenOneIsSent(_ c: Case) async throws {
        #expect(try await code(c, nonce: "the-raw-nonce") == nil)
        #expect(try await code(c, nonce: "the-raw-nonce") { $0["nonce"] = .string("another-nonce") } == "nonce_mismatch")
        #expect(try await code(c, nonce: "the-raw-nonce") { $0["nonce"] = nil } == "nonce_mismatch")
        // The raw nonce, not its hash (Apple's mode is not an OIDC provider's).
        #expect(try await code(c, nonce: "the-raw-nonce") { $0["nonce"] = .string(F.sha256Hex("the-raw-nonce")) } == "nonce_mismatch")
    }

    @Test(arguments: cases) func anOversizedTokenIsRefusedUnread(_ c: Case) async throws {
        #expect(try await code(c) { $0["padding"] = .string(String(repeating: "x", count: 20_000)) } == "invalid_token")
    }

    @Test(arguments: cases) func duplicateMembersAndMalformedSegmentsAreRefused(_ c: Case) async throws {
        let signer = try Self.signer()
        let (verifier, _) = try verifier(c)
        let header = try F.json(["alg": .string("RS256"), "kid": .string(try #require(signer.currentKeyID(.rs256))), "typ": .string("JWT")])
        var payload = try F.json(c.claims())
        payload.removeLast()
        payload += ",\"sub\":\"someone-else\"}"
        let duplicate = try signer.mint(rawHeader: Data(header.utf8), rawPayload: Data(payload.utf8), algorithm: .rs256)
        #expect(await verifier.failedCheck(duplicate) == "structure")
        let valid = try signer.mint(c.claims())
        let parts = valid.split(separator: ".").map(String.init)
        for malformed in [parts[0] + "." + parts[1], parts.joined(separator: ".") + ".x", "!!." + parts[1] + "." + parts[2], "..", ""] {
            #expect(await verifier.failureCode(malformed) == "invalid_token", "\(malformed.prefix(20))")
        }
    }

    /// Every type the broker registers runs a battery: Apple, Google and Facebook in
    /// ``ProviderConformanceTests``, OpenID Connect here. A new built-in type fails this test
    /// until its cases are added.
    @Test func everyRegisteredTypeHasItsBattery() {
        var logger = Logger(label: "OIDCConformanceTests")
        logger.logLevel = .error
        let context = ProviderContext(
            endpoints: ProviderEndpoints(), keySets: ProviderKeySets(httpClient: .providers, logger: logger, fetchTimeout: .seconds(1)),
            secrets: SecretBox(masterKey: MasterKey.generate().key), httpClient: .providers, logger: logger)
        let registered = Set(ProviderRegistry.builtIn(context).descriptors.map(\.type.rawValue))
        let covered: Set<String> = ["apple", "google", "facebook", "oidc"]
        #expect(registered == covered)
    }
}

import BrokerCore
import Foundation
import TestSupport
import Testing

@testable import Providers

/// Real Apple (and Google) identity tokens copied from public repositories, verified against
/// JWKS snapshots at a fixed clock (they are all long expired). See
/// Tests/Fixtures/provider-tokens/README.md for where each one comes from.
@Suite struct RealProviderTokenTests {
    typealias F = VerifierFixture

    static let fixtures = ProviderFixtures.directory

    static let appleIssuer: Set<String> = ["https://appleid.apple.com"]
    static let googleIssuers: Set<String> = ["accounts.google.com", "https://accounts.google.com"]

    static let appleTokens = ProviderFixtures.appleTokens

    static let googleTokens: [(token: String, jwks: String)] = [
        ("idtoken_google_f5f4bf46_1699138994_risc0.jwt", "jwks_google_f5f4bf46_f833e8a7_2023-11-06_risc0.json"),
        ("idtoken_google_f5f4bf46_1699257748_risc0.jwt", "jwks_google_f5f4bf46_f833e8a7_2023-11-06_risc0.json"),
        ("idtoken_google_f5f4bf46_1699417331_risc0.jwt", "jwks_google_f5f4bf46_f833e8a7_2023-11-06_risc0.json"),
        ("idtoken_google_5b370696_1699946173_risc0.jwt", "jwks_google_2023-11-14_risc0.json"),
        ("idtoken_google_e4adfb43_1701561405_risc0.jwt", "jwks_google_2023-12-02_risc0.json"),
    ]

    static func read(_ relativePath: String) throws -> Data {
        try Data(contentsOf: fixtures.appendingPathComponent(relativePath))
    }

    static func token(_ relativePath: String) throws -> String {
        String(decoding: try read(relativePath), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func verifier(jwks relativePath: String, issuers: Set<String> = appleIssuer, audiences: Set<String>?) throws
        -> IdentityTokenVerifier
    {
        IdentityTokenVerifier(
            policy: VerificationPolicy(issuers: issuers, audiences: audiences),
            keys: JWKSCache(source: .fixed(try read(relativePath)), logger: F.logger))
    }

    /// The token's own `iat` and `aud` (read without verifying, to pick the clock and audience).
    static func issuedAtAndAudience(_ token: String) throws -> (Date, String) {
        let payload = try F.segment(token, 1)
        let iat = try #require(payload["iat"] as? NSNumber)
        let aud = try #require(payload["aud"] as? String)
        return (Date(timeIntervalSince1970: iat.doubleValue), aud)
    }

    /// Verifies an Apple fixture at `iat + 60`, first without and then with its own audience.
    static func verifyApple(_ name: String, jwks: String) async throws -> IdentityClaims {
        let token = try token("apple/" + name)
        let (issuedAt, audience) = try issuedAtAndAudience(token)
        let at = issuedAt.addingTimeInterval(60)
        let anyAudience = try verifier(jwks: "apple/" + jwks, audiences: nil)
        let report = await anyAudience.check(token, nonce: .notChecked, at: at)
        #expect(report.isValid, "\(name): \(report.checks.filter { !$0.passed }.map(\.detail))")
        let ownAudience = try verifier(jwks: "apple/" + jwks, audiences: [audience])
        let claims = try await ownAudience.verify(token, nonce: .notChecked, at: at)
        #expect(claims.issuer == "https://appleid.apple.com")
        #expect(claims.audiences == [audience])
        #expect(claims.issuedAt == issuedAt)
        #expect(report.claims == claims)
        return claims
    }

    @Test func theFixturesFolderIsBesideThePackage() throws {
        #expect(FileManager.default.fileExists(atPath: Self.fixtures.appendingPathComponent("README.md").path))
        let apple = try FileManager.default.contentsOfDirectory(atPath: Self.fixtures.appendingPathComponent("apple").path)
        #expect(Set(apple.filter { $0.hasPrefix("idtoken_apple_") }) == Set(Self.appleTokens.map(\.token)))
    }

    @Test(arguments: appleTokens)
    func realAppleTokensVerify(name: String, jwks: String) async throws {
        let claims = try await Self.verifyApple(name, jwks: jwks)
        #expect(claims.subject.hasPrefix("00"))
        #expect(claims.expiresAt.timeIntervalSince(claims.issuedAt) == (name.contains("86D88Kf") ? 600 : 86_400))
    }

    @Test func theW6WcOKBKeyIsTheSameInEverySnapshot() async throws {
        for jwks in ["jwks_apple_W6WcOKB_YuyXoY_2023-11_risc0.json", "jwks_apple_W6WcOKB_fh6Bs8C_YuyXoY_2023_namecare.json"] {
            _ = try await Self.verifyApple("idtoken_apple_W6WcOKB_2023-11-05_risc0.jwt", jwks: jwks)
        }
        _ = try await Self.verifyApple(
            "idtoken_apple_FftONTxoEg_2024-11-03_vapor_jwt.jwt", jwks: "jwks_apple_2024-10-01_panva_wellknown.json")
    }

    @Test func aNewerTokenHasBooleanEmailFlags() async throws {
        let name = "idtoken_apple_fh6Bs8C_2024-02-20_vapor_jwt.jwt"
        let payload = try F.segment(try Self.token("apple/" + name), 1)
        #expect(!(payload["email_verified"] is String))
        #expect(!(payload["is_private_email"] is String))
        #expect(IdentityClaims.flag(try JSONValue.parse(try F.segmentBytes(try Self.token("apple/" + name), 1))["email_verified"]) == true)
        let claims = try await Self.verifyApple(name, jwks: "jwks_apple_W6WcOKB_fh6Bs8C_YuyXoY_2023_namecare.json")
        #expect(claims.email == "8ysbchvc2m@privaterelay.appleid.com")
        #expect(claims.emailVerified == true)
        #expect(claims.isPrivateEmail == true)
        #expect(claims.nonceSupported == true)
        #expect(claims.realUserStatus == 2)
        #expect(claims.subject == "001542.b04100c51acb48d3a570684f17d6394d.1603")
    }

    @Test func anOlderTokenHasStringEmailFlags() async throws {
        let name = "idtoken_apple_W6WcOKB_2023-07-16_namecare.jwt"
        let payload = try F.segment(try Self.token("apple/" + name), 1)
        #expect(payload["email_verified"] as? String == "true")
        #expect(payload["is_private_email"] as? String == "true")
        let claims = try await Self.verifyApple(name, jwks: "jwk_apple_W6WcOKB_afuture.json")
        #expect(claims.email == "ecr9pbhimu@privaterelay.appleid.com")
        #expect(claims.emailVerified == true)
        #expect(claims.isPrivateEmail == true)
        #expect(claims.audiences == ["app.namecare.ios"])
    }

    @Test func realUserStatusDecodes() async throws {
        let afuture = try await Self.verifyApple(
            "idtoken_apple_W6WcOKB_2023-12-24_afuture_real_user_status2.jwt", jwks: "jwk_apple_W6WcOKB_afuture.json")
        #expect(afuture.realUserStatus == 2)
        #expect(afuture.email == nil)
        #expect(afuture.emailVerified == nil)
        let recent = try await Self.verifyApple(
            "idtoken_apple_dMlERBaFdK_2025-02-02_vapor_jwt.jwt", jwks: "jwk_apple_dMlERBaFdK_respectme.json")
        #expect(recent.realUserStatus == 0)
        #expect(recent.emailVerified == true)
        let early = try await Self.verifyApple(
            "idtoken_apple_86D88Kf_2020-02-17_vapor_jwt.jwt", jwks: "jwks_apple_86D88Kf_2020_nerdzlab.json")
        #expect(early.realUserStatus == nil)
        #expect(early.nonceSupported == nil)
        #expect(early.emailVerified == true)
    }

    @Test func theRisc0TokenNonceComparesRaw() async throws {
        let token = try Self.token("apple/idtoken_apple_W6WcOKB_2023-11-05_risc0.jwt")
        let (issuedAt, audience) = try Self.issuedAtAndAudience(token)
        let verifier = try Self.verifier(jwks: "apple/jwk_apple_W6WcOKB_afuture.json", audiences: [audience])
        let raw = "0xefdF9861F3eDc2404643B588378FE242FCadE658"
        let at = issuedAt.addingTimeInterval(60)
        #expect(await verifier.failureCode(token, nonce: .init(rawNonce: raw, mode: .raw), at: at) == nil)
        #expect(await verifier.failureCode(token, nonce: .init(rawNonce: raw, mode: .sha256), at: at) == "nonce_mismatch")
    }

    @Test func theNegativesAreRefused() async throws {
        let verifier = try Self.verifier(jwks: "apple/jwks_apple_86D88Kf_2020_nerdzlab.json", audiences: nil)
        let at = Date(timeIntervalSince1970: 1_588_257_684 + 60)
        let unknownKid = try Self.token("apple/negative_kid_unknown_nerdzlab.jwt")
        // Its forged header is padded base64 ("...In0="): not canonical, refused before its
        // unknown kid is even looked up.
        #expect(await verifier.failureCode(unknownKid, nonce: .notChecked, at: at) == "invalid_token")
        #expect(await verifier.failedCheck(unknownKid, nonce: .notChecked, at: at) == "structure")
        let fakeHeader = try Self.token("apple/negative_fake_header_nerdzlab.jwt")
        #expect(await verifier.failureCode(fakeHeader, nonce: .notChecked, at: at) == "invalid_token")
        // The genuine token they were made from verifies with the same verifier and clock.
        let genuine = try Self.token("apple/idtoken_apple_86D88Kf_2020-04-30_nerdzlab.jwt")
        #expect(await verifier.failureCode(genuine, nonce: .notChecked, at: at) == nil)
    }

    @Test(arguments: appleTokens)
    func aRealTokenOneSecondPastExpiryAndSkewIsExpired(name: String, jwks: String) async throws {
        let token = try Self.token("apple/" + name)
        let exp = try #require(try F.segment(token, 1)["exp"] as? NSNumber)
        let expiry = Date(timeIntervalSince1970: exp.doubleValue)
        let verifier = try Self.verifier(jwks: "apple/" + jwks, audiences: nil)
        #expect(await verifier.failureCode(token, nonce: .notChecked, at: expiry.addingTimeInterval(61)) == "token_expired")
        #expect(await verifier.failureCode(token, nonce: .notChecked, at: expiry.addingTimeInterval(59)) == nil)
    }

    @Test func aRealTokenForAnotherAudienceIsRefused() async throws {
        let token = try Self.token("apple/idtoken_apple_dMlERBaFdK_2025-02-02_vapor_jwt.jwt")
        let (issuedAt, _) = try Self.issuedAtAndAudience(token)
        // Same team, same sub, but issued to another app of the team.
        let verifier = try Self.verifier(jwks: "apple/jwk_apple_dMlERBaFdK_respectme.json", audiences: ["com.raywenderlich.TILiOS"])
        #expect(await verifier.failureCode(token, nonce: .notChecked, at: issuedAt.addingTimeInterval(60)) == "audience_mismatch")
    }

    @Test func aRealAppleTokenIsRefusedAsGoogleAndWithTheWrongKeySet() async throws {
        let token = try Self.token("apple/idtoken_apple_fh6Bs8C_2024-02-20_vapor_jwt.jwt")
        let (issuedAt, audience) = try Self.issuedAtAndAudience(token)
        let at = issuedAt.addingTimeInterval(60)
        let asGoogle = try Self.verifier(
            jwks: "apple/jwks_apple_W6WcOKB_fh6Bs8C_YuyXoY_2023_namecare.json", issuers: Self.googleIssuers, audiences: [audience])
        #expect(await asGoogle.failureCode(token, nonce: .notChecked, at: at) == "issuer_mismatch")
        let oldKeys = try Self.verifier(jwks: "apple/jwks_apple_86D88Kf_2020_nerdzlab.json", audiences: [audience])
        #expect(await oldKeys.failureCode(token, nonce: .notChecked, at: at) == "unknown_key")
    }

    @Test func theFakeGoogleTokenIsRefusedByGooglesKeySet() async throws {
        let token = try Self.token("synthetic/idtoken_fake_google_iss_scottbrady_risc0.jwt")
        let (issuedAt, audience) = try Self.issuedAtAndAudience(token)
        let at = issuedAt.addingTimeInterval(60)
        let google = try Self.verifier(
            jwks: "google/jwks_google_f5f4bf46_f833e8a7_2023-11-06_risc0.json", issuers: Self.googleIssuers, audiences: nil)
        #expect(await google.failureCode(token, nonce: .notChecked, at: at) == "unknown_key")
        let googleWithAudience = try Self.verifier(
            jwks: "google/jwks_google_f5f4bf46_f833e8a7_2023-11-06_risc0.json", issuers: Self.googleIssuers, audiences: [audience])
        #expect(await googleWithAudience.failureCode(token, nonce: .notChecked, at: at) == "unknown_key")
        // It is a well-formed, correctly signed token: only trusting its own published test key
        // would make it pass, which is exactly what a Google verifier must not do.
        let ownKey = try Self.verifier(
            jwks: "synthetic/jwks_test_8e4ea9f5_scottbrady_risc0.json", issuers: Self.googleIssuers, audiences: [audience])
        #expect(await ownKey.failureCode(token, nonce: .notChecked, at: at) == nil)
    }

    @Test(arguments: googleTokens)
    func realGoogleTokensVerifyWithTheSharedVerifier(name: String, jwks: String) async throws {
        let token = try Self.token("google/" + name)
        let (issuedAt, audience) = try Self.issuedAtAndAudience(token)
        let verifier = try Self.verifier(jwks: "google/" + jwks, issuers: Self.googleIssuers, audiences: [audience])
        let claims = try await verifier.verify(token, nonce: .notChecked, at: issuedAt.addingTimeInterval(60))
        #expect(claims.issuer == "https://accounts.google.com")
        #expect(claims.emailVerified == true)
        #expect(claims.hostedDomain == "risczero.com")
        #expect(claims.authorizedParty == audience)
    }
}

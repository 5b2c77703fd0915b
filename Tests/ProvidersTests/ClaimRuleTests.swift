import BrokerCore
import Foundation
import JWTKit
import MockIdP
import Testing

@testable import Providers

/// `iss`, `aud`, `sub`, `iat`, `exp`, `nbf` with a 60 s clock skew, on correctly signed tokens.
@Suite struct ClaimRuleTests {
    typealias F = VerifierFixture

    /// Mints the default claims with `change` applied, and returns the verifier's code.
    func code(
        policy: VerificationPolicy = F.applePolicy(), at now: Date = F.now,
        _ change: (inout [String: JWTHeaderField]) -> Void
    ) async throws -> String? {
        let apple = try F.apple()
        var claims = F.claims(apple)
        change(&claims)
        return try await F.verifier(for: apple, policy: policy).failureCode(try apple.mint(claims), at: now)
    }

    // MARK: iss

    @Test func aWrongIssuerIsRefused() async throws {
        #expect(try await code { $0["iss"] = .string("https://appleid.apple.com.evil.example") } == "issuer_mismatch")
        #expect(try await code { $0["iss"] = .string("https://appleid.apple.com/") } == "issuer_mismatch")
        #expect(try await code { $0["iss"] = .string("appleid.apple.com") } == "issuer_mismatch")
        #expect(try await code { $0["iss"] = .string("https://accounts.google.com") } == "issuer_mismatch")
    }

    @Test func aMissingIssuerIsRefused() async throws {
        #expect(try await code { $0["iss"] = nil } == "issuer_mismatch")
        #expect(try await code { $0["iss"] = .null } == "issuer_mismatch")
        #expect(try await code { $0["iss"] = .array([.string(MockAppleIdP.issuer)]) } == "issuer_mismatch")
    }

    // MARK: aud

    @Test func aWrongAudienceIsRefused() async throws {
        #expect(try await code { $0["aud"] = .string("com.example.other-app") } == "audience_mismatch")
        #expect(try await code { $0["aud"] = .string(F.clientID.uppercased()) } == "audience_mismatch")
        #expect(try await code { $0["aud"] = .array([.string("com.example.other-app")]) } == "audience_mismatch")
    }

    @Test func aMissingAudienceIsRefused() async throws {
        #expect(try await code { $0["aud"] = nil } == "audience_mismatch")
        #expect(try await code { $0["aud"] = .null } == "audience_mismatch")
        #expect(try await code { $0["aud"] = .array([]) } == "audience_mismatch")
        #expect(try await code { $0["aud"] = .int(1) } == "audience_mismatch")
        // Without a configured audience, a token with no aud is still refused.
        #expect(try await code(policy: F.applePolicy(audiences: nil)) { $0["aud"] = nil } == "audience_mismatch")
    }

    @Test func anAudienceArrayWithAnUntrustedExtraIsRefused() async throws {
        #expect(
            try await code { $0["aud"] = .array([.string(F.clientID), .string("com.attacker.app")]) } == "audience_mismatch")
        #expect(
            try await code { $0["aud"] = .array([.string("com.attacker.app"), .string(F.clientID)]) } == "audience_mismatch")
        // A non-string member is not silently dropped.
        #expect(try await code { $0["aud"] = .array([.string(F.clientID), .int(7)]) } == "audience_mismatch")
    }

    @Test func anAudienceArrayWithOnlyTrustedValuesVerifies() async throws {
        let policy = F.applePolicy(audiences: [F.clientID, "com.example.broker.web"])
        let apple = try F.apple()
        let token = try apple.mint(F.claims(apple, extra: ["aud": .array([.string(F.clientID), .string("com.example.broker.web")])]))
        let claims = try await F.verifier(for: apple, policy: policy).verify(token, nonce: .none, at: F.now)
        #expect(claims.audiences == [F.clientID, "com.example.broker.web"])
        #expect(try await code { $0["aud"] = .array([.string(F.clientID)]) } == nil)
    }

    // MARK: sub

    @Test func aMissingSubjectIsRefused() async throws {
        #expect(try await code { $0["sub"] = nil } == "invalid_token")
        #expect(try await code { $0["sub"] = .string("") } == "invalid_token")
        #expect(try await code { $0["sub"] = .int(42) } == "invalid_token")
        #expect(try await code { $0["sub"] = .string(String(repeating: "s", count: 256)) } == "invalid_token")
    }

    // MARK: iat, exp, nbf

    @Test func aMissingIssuedAtIsRefused() async throws {
        #expect(try await code { $0["iat"] = nil } == "invalid_token")
        #expect(try await code { $0["iat"] = .string("1750000000") } == "invalid_token")
    }

    @Test func aMissingExpiryIsRefused() async throws {
        #expect(try await code { $0["exp"] = nil } == "invalid_token")
        #expect(try await code { $0["exp"] = .string("1750000600") } == "invalid_token")
    }

    @Test func anExpiredTokenIsRefused() async throws {
        let exp = Int(F.now.timeIntervalSince1970) + 600
        let expiry = Date(timeIntervalSince1970: TimeInterval(exp))
        #expect(try await code(at: expiry.addingTimeInterval(61)) { _ in } == "token_expired")
        #expect(try await code(at: expiry.addingTimeInterval(3_600)) { _ in } == "token_expired")
        // Exactly at exp + skew the token is over; one second before, the skew still covers it.
        #expect(try await code(at: expiry.addingTimeInterval(60)) { _ in } == "token_expired")
        #expect(try await code(at: expiry.addingTimeInterval(59)) { _ in } == nil)
        #expect(try await code(at: expiry) { _ in } == nil)
    }

    @Test func anIssuedAtInTheFutureBeyondTheSkewIsRefused() async throws {
        let now = Int(F.now.timeIntervalSince1970)
        #expect(try await code { $0["iat"] = .int(now + 61) } == "token_not_yet_valid")
        #expect(try await code { $0["iat"] = .int(now + 86_400) } == "token_not_yet_valid")
    }

    @Test func anIssuedAtInTheFutureWithinTheSkewIsAccepted() async throws {
        let now = Int(F.now.timeIntervalSince1970)
        #expect(try await code { $0["iat"] = .int(now + 60) } == nil)
        #expect(try await code { $0["iat"] = .int(now + 30) } == nil)
    }

    @Test func aNotBeforeInTheFutureIsRefused() async throws {
        let now = Int(F.now.timeIntervalSince1970)
        #expect(try await code { $0["nbf"] = .int(now + 61) } == "token_not_yet_valid")
        #expect(try await code { $0["nbf"] = .int(now + 3_600) } == "token_not_yet_valid")
        #expect(try await code { $0["nbf"] = .string("soon") } == "token_not_yet_valid")
        // Within the skew, and in the past, nbf is fine.
        #expect(try await code { $0["nbf"] = .int(now + 60) } == nil)
        #expect(try await code { $0["nbf"] = .int(now - 300) } == nil)
    }

    @Test func everyClaimProblemIsReportedAtOnce() async throws {
        let apple = try F.apple()
        var claims = F.claims(apple)
        claims["iss"] = .string("https://evil.example")
        claims["aud"] = .string("com.attacker.app")
        claims["sub"] = nil
        let report = try await F.verifier(for: apple).check(try apple.mint(claims), nonce: .none, at: F.now.addingTimeInterval(7_200))
        #expect(!report.isValid)
        #expect(report.claims == nil)
        #expect(report.failure?.code == "issuer_mismatch")
        #expect(Set(report.checks.filter { !$0.passed }.map(\.name)) == ["iss", "aud", "sub", "exp"])
    }
}

import BrokerCore
import Crypto
import Foundation
import JWTKit
import Logging
import MockIdP
import Testing

@testable import Providers

/// Shared pieces of the verifier tests: a fixed clock, a quiet logger, an Apple-shaped policy
/// and helpers that mint tokens with the mock and report the error code of a refusal.
enum VerifierFixture {
    /// Every test runs at this instant (whole seconds, so `iat`/`exp` round-trip exactly).
    static let now = Date(timeIntervalSince1970: 1_750_000_000)
    static let clientID = "com.example.broker.app"
    static let subject = "001234.0123456789abcdef0123456789abcdef.0042"

    /// One mock IdP for every test that only mints tokens (RSA key generation is the slow part
    /// of these tests). Tests that rotate keys make their own, through `MockAppleServer`.
    private static let shared = Result { try MockAppleIdP() }

    static func apple() throws -> MockAppleIdP { try shared.get() }

    static var logger: Logger {
        var logger = Logger(label: "ProvidersTests")
        logger.logLevel = .error
        return logger
    }

    static func applePolicy(audiences: Set<String>? = [clientID], maxTokenBytes: Int = 16_384) -> VerificationPolicy {
        VerificationPolicy(issuers: [MockAppleIdP.issuer], audiences: audiences, maxTokenBytes: maxTokenBytes)
    }

    /// A verifier whose key set is the mock's current JWKS document (fixed, no network).
    static func verifier(
        for apple: MockAppleIdP, policy: VerificationPolicy = applePolicy()
    ) throws -> IdentityTokenVerifier {
        let cache = JWKSCache(source: .fixed(try apple.jwksJSON()), logger: logger)
        return IdentityTokenVerifier(policy: policy, keys: cache)
    }

    /// Apple-shaped claims issued at `now` (600 s lifetime) for our client.
    static func claims(
        _ apple: MockAppleIdP, nonce: String? = nil, email: String? = "user@example.com", issuedAt: Date = now,
        extra: [String: JWTHeaderField] = [:]
    ) -> [String: JWTHeaderField] {
        apple.claims(subject: subject, audience: clientID, nonce: nonce, email: email, issuedAt: issuedAt, extra: extra)
    }

    /// The same JSON the mock signs (sorted keys, unescaped slashes), as text to edit by hand.
    static func json(_ fields: [String: JWTHeaderField]) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(fields), as: UTF8.self)
    }

    /// The header the mock writes for a valid token.
    static func header(_ apple: MockAppleIdP) -> [String: JWTHeaderField] {
        ["alg": .string("RS256"), "kid": .string(apple.currentKeyID), "typ": .string("JWT")]
    }

    static func sha256Hex(_ text: String) -> String {
        SHA256.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// The decoded header or payload (segment 0 or 1) of a compact JWS.
    static func segment(_ token: String, _ index: Int) throws -> [String: Any] {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        let data = try #require(Base64URL.decode(String(parts[index])))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// The decoded bytes of a token's segment.
    static func segmentBytes(_ token: String, _ index: Int) throws -> Data {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        return try #require(Base64URL.decode(String(parts[index])))
    }
}

extension IdentityTokenVerifier {
    /// The `code` of the refusal, or nil when the token verifies.
    func failureCode(_ token: String, nonce: NonceExpectation = .none, at now: Date = VerifierFixture.now) async -> String? {
        do {
            _ = try await verify(token, nonce: nonce, at: now)
            return nil
        } catch {
            return error.code
        }
    }

    /// The name of the first check that failed (nil when every check passed).
    func failedCheck(_ token: String, nonce: NonceExpectation = .none, at now: Date = VerifierFixture.now) async -> String? {
        await check(token, nonce: nonce, at: now).checks.first { !$0.passed }?.name
    }
}

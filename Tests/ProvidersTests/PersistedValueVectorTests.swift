import BrokerCore
import Foundation
import Testing

@testable import Providers

/// Known-answer vectors for the stored values derived in Providers (see
/// BrokerCoreTests/PersistedValueVectorTests for the rest): fixed inputs, the expected bytes
/// written out, computed once from the code as released. Databases hold these values: a vector
/// that fails means a change would strand them.
@Suite struct PersistedValueVectorTests {
    static let tenantID = UUID(uuidString: "0b5e1a7c-3d2f-4e6a-9b8c-1d2e3f405162")
    static let issuedAt = Date(timeIntervalSince1970: 1_700_000_000)

    static func claims(issuer: String, subject: String, jti: String?) -> IdentityClaims {
        var object: [String: JSONValue] = ["iss": .string(issuer), "sub": .string(subject)]
        if let jti { object["jti"] = .string(jti) }
        return IdentityClaims(
            issuer: issuer, subject: subject, audiences: ["com.acme.app"], issuedAt: issuedAt,
            expiresAt: issuedAt.addingTimeInterval(600), object: object)
    }

    /// The replay key of a token with a `jti` (decision 0018): SHA-256 over
    /// `identitybroker/id-token/v1\0<tenant>\0<provider>\0jti\0<iss>\0<jti>`, whatever else the
    /// token says. Stored: its first 16 bytes are `sessions.id` of the session the token opened
    /// (see BrokerCoreTests' `aSessionIDFromAJTIReplayKey`), which refuses the token again.
    @Test func theReplayKeyOfATokenWithAJTI() throws {
        let tenantID = try #require(Self.tenantID)
        let claims = Self.claims(issuer: "https://accounts.google.com", subject: "g-0001", jti: "f3a1c9e0b7d24c68a5e1")
        let key = claims.replayKey(tenantID: tenantID, provider: "google", token: "any.token.text")
        #expect(Hex.encode(key) == "d7946d1957bf15e09e2820a7c5d629d63d9026da0e6b0b9172a9b193bc4dc6c6")
        // The token's text does not count, the provider does.
        #expect(claims.replayKey(tenantID: tenantID, provider: "google", token: "other.token.text") == key)
        #expect(claims.replayKey(tenantID: tenantID, provider: "apple", token: "any.token.text") != key)
    }

    /// The replay key of a token without a `jti` (or with an empty one): SHA-256 over
    /// `identitybroker/id-token/v1\0<tenant>\0<provider>\0token\0<the whole token>`. Stored: with
    /// the token's `iat`, `sessions.id` (see BrokerCoreTests'
    /// `aSessionIDFromAWholeTokenReplayKeyAndIssueTime`).
    @Test func theReplayKeyOfATokenWithoutAJTI() throws {
        let tenantID = try #require(Self.tenantID)
        let token = "eyJhbGciOiJFUzI1NiIsImtpZCI6IkFQUExFMSJ9.eyJzdWIiOiIwMDEyMzQuYWJjIn0.c2lnbmF0dXJl"
        let claims = Self.claims(issuer: "https://appleid.apple.com", subject: "001234.abc", jti: nil)
        let key = claims.replayKey(tenantID: tenantID, provider: "apple", token: token)
        #expect(Hex.encode(key) == "32be0105c51b97460297be86921f956ba70a68e704d1d08626206e804229fa85")
        let emptyJTI = Self.claims(issuer: "https://appleid.apple.com", subject: "001234.abc", jti: "")
        #expect(emptyJTI.replayKey(tenantID: tenantID, provider: "apple", token: token) == key)
    }

    /// What a verified proof hands the session: the replay key under the identity's provider id,
    /// and whether it covers the issue time. The provider ids `google` and `apple` are part of
    /// every stored session id.
    @Test func aVerifiedProofKeysByItsProviderID() throws {
        let tenantID = try #require(Self.tenantID)
        let google = VerifiedProof(
            identity: ProviderIdentity(
                provider: .google, providerScope: "", subject: "g-0001", email: nil, emailVerified: false, isPrivateEmail: false,
                name: PersonName(givenName: nil, familyName: nil)),
            clientID: "web", claims: Self.claims(issuer: "https://accounts.google.com", subject: "g-0001", jti: "f3a1c9e0b7d24c68a5e1"),
            token: "any.token.text", tenantID: tenantID)
        #expect(google.replayKey.map { Hex.encode($0) } == "d7946d1957bf15e09e2820a7c5d629d63d9026da0e6b0b9172a9b193bc4dc6c6")
        #expect(google.replayKeyCoversIssueTime == false)

        let token = "eyJhbGciOiJFUzI1NiIsImtpZCI6IkFQUExFMSJ9.eyJzdWIiOiIwMDEyMzQuYWJjIn0.c2lnbmF0dXJl"
        let apple = VerifiedProof(
            identity: ProviderIdentity(
                provider: .apple, providerScope: "TEAM000001", subject: "001234.abc", email: nil, emailVerified: false,
                isPrivateEmail: false, name: PersonName(givenName: nil, familyName: nil)),
            clientID: "com.acme.app", claims: Self.claims(issuer: "https://appleid.apple.com", subject: "001234.abc", jti: nil),
            token: token, tenantID: tenantID)
        #expect(apple.replayKey.map { Hex.encode($0) } == "32be0105c51b97460297be86921f956ba70a68e704d1d08626206e804229fa85")
        #expect(apple.replayKeyCoversIssueTime == true)
        #expect(apple.issuedAt == Self.issuedAt)
    }

    /// Apple's refresh token, kept sealed (`identities.provider_refresh_token_sealed`) under
    /// `apple_refresh:<tenant>:<team>:<sub>`. Sealing is randomized: the vector is a stored
    /// value, which must open under a box of the same master key (00 01 … 1f).
    @Test func aSealedAppleRefreshTokenOpens() throws {
        let tenantID = try #require(Self.tenantID)
        let context = AppleProvider.refreshTokenSealingContext(
            tenantID: tenantID, teamID: "TEAM000001", subject: "001234.0a1b2c3d4e5f.0123")
        #expect(context == "apple_refresh:0b5e1a7c-3d2f-4e6a-9b8c-1d2e3f405162:TEAM000001:001234.0a1b2c3d4e5f.0123")
        let box = SecretBox(masterKey: try MasterKey(base64: "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="))
        // identities.provider_refresh_token_sealed
        let sealed = try #require(
            Data(base64Encoded: "AZbE58UKPiKyrt5ISBVuy+IfA2984X/QHhWZzOq7ayRHKqL7OVSFiO3QX9qDiW5A2CP7HxF2glnJz2BlHOt3cSozAQ=="))
        let opened = try box.open(sealed, context: context, what: "Apple refresh token")
        #expect(String(decoding: opened, as: UTF8.self) == "r1d2e3f4.0.sxyz.AbCdEfGhIjKlMnOpQrStUv")
        let otherSubject = AppleProvider.refreshTokenSealingContext(tenantID: tenantID, teamID: "TEAM000001", subject: "001234.other")
        #expect(throws: BrokerError.self) { try box.open(sealed, context: otherSubject, what: "Apple refresh token") }
    }
}

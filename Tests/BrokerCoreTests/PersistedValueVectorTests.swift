import BrokerCore
import Crypto
import Foundation
import Testing

/// Known-answer vectors for every value the broker derives and stores: fixed inputs, the
/// expected bytes written out. They were computed once from the code as released (and checked
/// against an independent implementation) and must never change: databases already hold them.
/// A refactor that changes one of these strands every stored token, key or session. If a vector
/// fails, the change is the bug, not the vector.
@Suite struct PersistedValueVectorTests {
    /// 32 fixed bytes 00 01 … 1f (the master key of the test suites, `TestDatabase.masterKey`).
    static let masterKeyBase64 = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
    static let tenantID = UUID(uuidString: "0b5e1a7c-3d2f-4e6a-9b8c-1d2e3f405162")

    static func box() throws -> SecretBox { SecretBox(masterKey: try MasterKey(base64: masterKeyBase64)) }

    static func hex(_ data: Data) -> String { Hex.encode(data) }

    static func hex(_ key: SymmetricKey) -> String { key.withUnsafeBytes { Hex.encode($0) } }

    // MARK: Refresh tokens

    /// The successor key (decision 0017): HKDF-SHA256 of the master key, info
    /// `identitybroker/refresh-token-successor`. Not stored, but every stored refresh-token hash
    /// after a rotation (`sessions.refresh_token_hash`) is the hash of a token derived under it.
    @Test func theRefreshSuccessorKeyIsDerivedFromTheMasterKey() throws {
        let key = try Self.box().derivedKey(purpose: "refresh-token-successor")
        #expect(Self.hex(key) == "a6150eb436ebb1d25d276c7c1bfa8f54483801cba6c65c8d470d64bf3f43617a")
    }

    /// A token that names its session (decision 0027): `ibr_` + base64url(session id ‖ 32 secret
    /// bytes). Stored: its SHA-256 in `sessions.refresh_token_hash` (live) and
    /// `refresh_tokens.token_hash` (spent); the session id is `sessions.id`.
    @Test func aTokenNamingItsSessionParsesAndHashesAsStored() throws {
        // Session 018bcfe5-6800-7a3c-9d41-2b6f00c1e7a5, secret bytes (7·i + 3) mod 256.
        let value = "ibr_AYvP5WgAejydQStvAMHnpQMKERgfJi00O0JJUFdeZWxzeoGIj5adpKuyucDHztXc"
        let token = try #require(RefreshToken(parsing: value))
        #expect(token.value == value)
        #expect(token.sessionID == UUID(uuidString: "018bcfe5-6800-7a3c-9d41-2b6f00c1e7a5"))
        // sessions.refresh_token_hash / refresh_tokens.token_hash
        #expect(Self.hex(token.hash) == "51d61fdeee334d4ac8be9b29b548942302265ab0dfe106ccf0448741b51aa844")
    }

    /// The successor of a token naming its session: HMAC-SHA256 of the token under the successor
    /// key as its secret, the same session id. Stored: its hash in `sessions.refresh_token_hash`
    /// after the rotation; a retried refresh must derive the same one again.
    @Test func theSuccessorOfATokenNamingItsSessionIsFixed() throws {
        let key = try Self.box().derivedKey(purpose: "refresh-token-successor")
        let token = try #require(RefreshToken(parsing: "ibr_AYvP5WgAejydQStvAMHnpQMKERgfJi00O0JJUFdeZWxzeoGIj5adpKuyucDHztXc"))
        let successor = token.successor(key: key)
        #expect(successor.value == "ibr_AYvP5WgAejydQStvAMHnpbkmM7zOiyKq0mjqoEpLfW24sDPwn5Wl_yQa5qZ9APYm")
        #expect(successor.sessionID == token.sessionID)
        // sessions.refresh_token_hash after the rotation
        #expect(Self.hex(successor.hash) == "2d5d11cfaab25b975415cf1879e6465c41151055893e0b447838010fb14a57c1")
    }

    /// A token issued before tokens named their session: `ibr_` + base64url(32 bytes), found by
    /// its hash (`sessions.refresh_token_hash` where `refresh_token_legacy`, unique index
    /// `sessions_legacy_refresh_token_idx` over its copy `legacy_refresh_token_hash`); its
    /// successor names no session either.
    @Test func aLegacyTokenAndItsSuccessorHashAsStored() throws {
        // Bytes (11·i + 5) mod 256.
        let value = "ibr_BRAbJjE8R1JdaHN-iZSfqrXAy9bh7PcCDRgjLjlET1o"
        let token = try #require(RefreshToken(parsing: value))
        #expect(token.sessionID == nil)
        // sessions.refresh_token_hash (refresh_token_legacy = true)
        #expect(Self.hex(token.hash) == "495cec9526f6d2c5d7e1a4d56bb3cf1b481deb8e10b75087423ce5b81ccc657d")
        let successor = token.successor(key: try Self.box().derivedKey(purpose: "refresh-token-successor"))
        #expect(successor.value == "ibr_zrcpe0gjNTMiSAI2hHvxh1EmtH2ZrpB6c1kmWvTJOH8")
        #expect(successor.sessionID == nil)
        // sessions.refresh_token_hash after the rotation
        #expect(Self.hex(successor.hash) == "844ccf89733b03cf6461852196d6b6cc3819e9daa4ea144f73fe4b8ec0817534")
    }

    /// A new token carries its session id's 16 bytes in order, then 32 random bytes: the form
    /// the vectors above parse.
    @Test func aNewTokenCarriesItsSessionIDFirst() throws {
        let sessionID = try #require(UUID(uuidString: "018bcfe5-6800-7a3c-9d41-2b6f00c1e7a5"))
        let token = RefreshToken.generate(sessionID: sessionID)
        #expect(token.value.utf8.count == 68)
        #expect(token.value.hasPrefix("ibr_AYvP5WgAejydQStvAMHnp"), "base64url of 01 8b cf e5 68 00 7a 3c 9d 41 2b 6f 00 c1 e7 a5 …")
        let bytes = try #require(Base64URL.decode(String(token.value.dropFirst(4))))
        #expect(Self.hex(bytes.prefix(16)) == "018bcfe568007a3c9d412b6f00c1e7a5")
        #expect(RefreshToken(parsing: token.value)?.sessionID == sessionID)
        #expect(token.hash == Data(SHA256.hash(data: Data(token.value.utf8))))
    }

    // MARK: Session ids

    /// A session opened by an identity token whose replay key covers its issue time (no `jti`;
    /// decision 0023): a version 7 UUID of the token's `iat` in milliseconds, the rest from the
    /// key. Stored: `sessions.id` (its primary key refuses the token a second time).
    @Test func aSessionIDFromAWholeTokenReplayKeyAndIssueTime() throws {
        var session = NewSession(id: UUID(), refreshTokenHash: Data(), expiresAt: Date(), refreshTokenExpiresAt: Date())
        // The Apple whole-token replay key of ProvidersTests/PersistedValueVectorTests.
        let key = try #require(Self.bytes("32be0105c51b97460297be86921f956ba70a68e704d1d08626206e804229fa85"))
        session.identify(byReplayKey: key, issuedAt: Date(timeIntervalSince1970: 1_700_000_000))
        // sessions.id
        #expect(session.id == UUID(uuidString: "018bcfe5-6800-72be-8105-c51b97460297"))
        // Milliseconds count; below a millisecond does not.
        session.identify(byReplayKey: key, issuedAt: Date(timeIntervalSince1970: 1_700_000_000.000_9))
        #expect(session.id == UUID(uuidString: "018bcfe5-6800-72be-8105-c51b97460297"))
    }

    /// A session opened by a token with a `jti` (the key does not cover the issue time): the
    /// key's first 128 bits as they are, no version bits. Stored: `sessions.id`.
    @Test func aSessionIDFromAJTIReplayKey() throws {
        var session = NewSession(id: UUID(), refreshTokenHash: Data(), expiresAt: Date(), refreshTokenExpiresAt: Date())
        // The Google jti replay key of ProvidersTests/PersistedValueVectorTests.
        let key = try #require(Self.bytes("d7946d1957bf15e09e2820a7c5d629d63d9026da0e6b0b9172a9b193bc4dc6c6"))
        session.identify(byReplayKey: key, issuedAt: nil)
        // sessions.id
        #expect(session.id == UUID(uuidString: "d7946d19-57bf-15e0-9e28-20a7c5d629d6"))
    }

    // MARK: API keys

    /// An API key is stored as its SHA-256 (`api_keys.key_hash`) and its first 12 characters
    /// (`api_keys.prefix`); every request looks its caller up by that hash.
    @Test func anAPIKeyHashesAsStored() throws {
        let key = try #require(APIKeyToken(parsing: "ibk_Q2xvdWRz_S2VlcEJsdWVTa2llc0FuZFdhcm1TdW5zaGk"))
        // api_keys.key_hash
        #expect(Self.hex(key.hash) == "9e46b8ab1f8c4164a789c3e3ca9b64177f4a2d26e26f035e05cf23d10796e8a7")
        // api_keys.prefix
        #expect(key.prefix == "ibk_Q2xvdWRz")
    }

    // MARK: Sealed secrets

    /// Sealing is randomized (a fresh AES-GCM nonce each time), so these vectors are stored
    /// values: version byte 01 ‖ nonce ‖ ciphertext ‖ tag under the master key, with the
    /// context as associated data. Each must open under a box of the same master key, with the
    /// context the code names, and under no other context.
    @Test func aSealedSigningKeyOpens() throws {
        let kid = "n8xYb2c1Tq0wVfJ3kR7sLmA9eUdHpZiG4oK6jEt5yXc"
        let context = SigningKeyRecord.sealingContext(tenantID: try #require(Self.tenantID), kid: kid)
        #expect(context == "signing_key:0b5e1a7c-3d2f-4e6a-9b8c-1d2e3f405162:n8xYb2c1Tq0wVfJ3kR7sLmA9eUdHpZiG4oK6jEt5yXc")
        // signing_keys.private_key_sealed
        let sealed = "Ab3vwllCa9CG0RJhCDpDDHQfNSaPvBhbjDr+8z03ekpEABM1u/ncnBISYZNMqEe3oeHg6UaoVHDnVgmi7A=="
        let opened = try Self.open(sealed, context: context)
        #expect(opened == Data((0..<32).map { UInt8(truncatingIfNeeded: 13 * $0 + 1) }))
    }

    @Test func aSealedAppleKeyOpens() throws {
        let context = AppleTeam.sealingContext(tenantID: try #require(Self.tenantID), teamID: "TEAM000001")
        #expect(context == "apple_p8:0b5e1a7c-3d2f-4e6a-9b8c-1d2e3f405162:TEAM000001")
        // apple_teams.private_key_sealed
        let sealed =
            "AZuFwIKNz7yINyb8IDtOrM8KzwgqVDQ0GPX2JFSHXXFbtTRePkC0g9mNESnAF0tPkXmI+dzvD3kdk+1Pmu7hPx4Wxmhjw6vxo8ZCrjedk2JCCW2ZHiC7m9VSnHL96Q8hK8TsrgxIIF5E75YnePkxIN8rwq34a0Je7u9e/7N5P4o5EzHJ3B7HphLdlGBGUYmcyJhgtw=="
        let opened = try Self.open(sealed, context: context)
        #expect(
            String(decoding: opened, as: UTF8.self)
                == "-----BEGIN PRIVATE KEY-----\nTUlHVEFnRUFNQk1HQnlxR1NNNDlBZ0VHQ0NxR1NNNDlBd0VIQkhrd2R3SUJBUVFn\n-----END PRIVATE KEY-----\n"
        )
    }

    @Test func aSealedFacebookAppSecretOpens() throws {
        let context = ProviderConfiguration.secretContext(
            tenantID: try #require(Self.tenantID), provider: .facebook, clientID: "1234567890")
        #expect(context == "provider_secret:0b5e1a7c-3d2f-4e6a-9b8c-1d2e3f405162:facebook:1234567890")
        // provider_configs.secret_sealed
        let sealed = "AV83MbUq0PsvgguRSfUOBgeJD1u93G/MWvDobOuq8MJsgYjT/MKaOQNizk3ivR6+57Jfirx06psNxS5xIw=="
        let opened = try Self.open(sealed, context: context)
        #expect(String(decoding: opened, as: UTF8.self) == "0123456789abcdef0123456789abcdef")
    }

    /// What opening checks: the version byte, the master key and the context.
    @Test func aSealedValueOpensNowhereElse() throws {
        let sealed = try #require(
            Data(base64Encoded: "AV83MbUq0PsvgguRSfUOBgeJD1u93G/MWvDobOuq8MJsgYjT/MKaOQNizk3ivR6+57Jfirx06psNxS5xIw=="))
        let context = "provider_secret:0b5e1a7c-3d2f-4e6a-9b8c-1d2e3f405162:facebook:1234567890"
        #expect(sealed.first == 1)
        #expect(throws: BrokerError.self) {
            try Self.box().open(sealed, context: "provider_secret:0b5e1a7c-3d2f-4e6a-9b8c-1d2e3f405162:facebook:1234567891", what: "t")
        }
        let stranger = SecretBox(masterKey: MasterKey.generate().key)
        #expect(throws: BrokerError.self) { try stranger.open(sealed, context: context, what: "t") }
        var otherVersion = sealed
        otherVersion[otherVersion.startIndex] = 2
        #expect(throws: BrokerError.self) { try Self.box().open(otherVersion, context: context, what: "t") }
    }

    static func open(_ base64: String, context: String) throws -> Data {
        let sealed = try #require(Data(base64Encoded: base64))
        return try box().open(sealed, context: context, what: "vector")
    }

    static func bytes(_ hex: String) -> Data? {
        var data = Data()
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex) ?? hex.endIndex
            guard let byte = UInt8(hex[index..<next], radix: 16) else { return nil }
            data.append(byte)
            index = next
        }
        return data
    }
}

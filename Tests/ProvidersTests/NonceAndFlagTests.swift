import BrokerCore
import Foundation
import JWTKit
import MockIdP
import Testing

@testable import Providers

/// The nonce check (per client: `sha256` or `raw`) and the Apple boolean flags.
@Suite struct NonceTests {
    typealias F = VerifierFixture
    static let rawNonce = "n-0S6_WzA2Mj-7f3c1d9e"

    func code(tokenNonce: String?, expect: NonceExpectation, extra: [String: JWTHeaderField] = [:]) async throws -> String? {
        let apple = try F.apple()
        let token = try apple.mint(F.claims(apple, nonce: tokenNonce, extra: extra))
        return try await F.verifier(for: apple).failureCode(token, nonce: expect)
    }

    @Test func sha256ModeMatchesTheHexDigestOfTheRawNonce() async throws {
        let hashed = F.sha256Hex(Self.rawNonce)
        #expect(hashed.count == 64)
        let apple = try F.apple()
        let token = try apple.mint(F.claims(apple, nonce: hashed))
        let claims = try await F.verifier(for: apple).verify(
            token, nonce: NonceExpectation(rawNonce: Self.rawNonce, mode: .sha256), at: F.now)
        #expect(claims.nonce == hashed)
        // Upper-case hex is not what the mode compares against.
        #expect(
            try await code(tokenNonce: hashed.uppercased(), expect: .init(rawNonce: Self.rawNonce, mode: .sha256)) == "nonce_mismatch")
    }

    @Test func rawModeMatchesAsIs() async throws {
        #expect(try await code(tokenNonce: Self.rawNonce, expect: .init(rawNonce: Self.rawNonce, mode: .raw)) == nil)
    }

    @Test func aHashedTokenNonceDoesNotVerifyInRawMode() async throws {
        let hashed = F.sha256Hex(Self.rawNonce)
        #expect(try await code(tokenNonce: hashed, expect: .init(rawNonce: Self.rawNonce, mode: .raw)) == "nonce_mismatch")
    }

    @Test func aRawTokenNonceDoesNotVerifyInSha256Mode() async throws {
        #expect(try await code(tokenNonce: Self.rawNonce, expect: .init(rawNonce: Self.rawNonce, mode: .sha256)) == "nonce_mismatch")
    }

    @Test func aWrongNonceIsRefused() async throws {
        let other = "another-nonce"
        #expect(try await code(tokenNonce: F.sha256Hex(other), expect: .init(rawNonce: Self.rawNonce, mode: .sha256)) == "nonce_mismatch")
        #expect(try await code(tokenNonce: other, expect: .init(rawNonce: Self.rawNonce, mode: .raw)) == "nonce_mismatch")
        #expect(try await code(tokenNonce: "", expect: .init(rawNonce: Self.rawNonce, mode: .raw)) == "nonce_mismatch")
        // Same length, one character different.
        let almost = String(Self.rawNonce.dropLast()) + "f"
        #expect(try await code(tokenNonce: almost, expect: .init(rawNonce: Self.rawNonce, mode: .raw)) == "nonce_mismatch")
    }

    @Test func aNonceSentButAbsentFromATokenThatSupportsNoncesIsRefused() async throws {
        let sent = NonceExpectation(rawNonce: Self.rawNonce, mode: .sha256)
        #expect(try await code(tokenNonce: nil, expect: sent) == "nonce_mismatch")
        #expect(try await code(tokenNonce: nil, expect: sent, extra: ["nonce_supported": .string("true")]) == "nonce_mismatch")
        // A token that says nothing about nonce support does not get the benefit of the doubt.
        let apple = try F.apple()
        var claims = F.claims(apple)
        claims["nonce_supported"] = nil
        #expect(try await F.verifier(for: apple).failureCode(try apple.mint(claims), nonce: sent) == "nonce_mismatch")
    }

    @Test func aNonceSentButAbsentFromATokenThatDoesNotSupportNoncesIsAccepted() async throws {
        let apple = try F.apple()
        let token = try apple.mint(F.claims(apple, extra: ["nonce_supported": .bool(false)]))
        let claims = try await F.verifier(for: apple).verify(
            token, nonce: NonceExpectation(rawNonce: Self.rawNonce, mode: .sha256), at: F.now)
        #expect(claims.nonceSupported == false)
        #expect(claims.nonce == nil)
        #expect(
            try await code(
                tokenNonce: nil, expect: .init(rawNonce: Self.rawNonce, mode: .raw), extra: ["nonce_supported": .string("false")])
                == nil)
    }

    @Test func nonceSupportedFalseDoesNotExcuseAWrongNonce() async throws {
        #expect(
            try await code(
                tokenNonce: "wrong", expect: .init(rawNonce: Self.rawNonce, mode: .raw), extra: ["nonce_supported": .bool(false)])
                == "nonce_mismatch")
    }

    @Test func noNonceSentOrNotCheckedAcceptsAnyTokenNonce() async throws {
        #expect(try await code(tokenNonce: nil, expect: .none) == nil)
        #expect(try await code(tokenNonce: "whatever", expect: .none) == nil)
        #expect(try await code(tokenNonce: "whatever", expect: .notChecked) == nil)
        #expect(try await code(tokenNonce: nil, expect: .notChecked) == nil)
    }
}

@Suite struct AppleFlagDecodingTests {
    typealias F = VerifierFixture

    func decoded(_ emailVerified: JWTHeaderField, _ isPrivateEmail: JWTHeaderField, nonceSupported: JWTHeaderField = .bool(true))
        async throws -> IdentityClaims
    {
        let apple = try F.apple()
        let token = try apple.mint(
            F.claims(
                apple,
                extra: ["email_verified": emailVerified, "is_private_email": isPrivateEmail, "nonce_supported": nonceSupported]))
        return try await F.verifier(for: apple).verify(token, nonce: .none, at: F.now)
    }

    @Test func stringFlagsDecode() async throws {
        let claims = try await decoded(.string("true"), .string("false"), nonceSupported: .string("true"))
        #expect(claims.emailVerified == true)
        #expect(claims.isPrivateEmail == false)
        #expect(claims.nonceSupported == true)
        let flipped = try await decoded(.string("false"), .string("true"), nonceSupported: .string("false"))
        #expect(flipped.emailVerified == false)
        #expect(flipped.isPrivateEmail == true)
        #expect(flipped.nonceSupported == false)
    }

    @Test func booleanFlagsDecode() async throws {
        let claims = try await decoded(.bool(true), .bool(false))
        #expect(claims.emailVerified == true)
        #expect(claims.isPrivateEmail == false)
        #expect(claims.nonceSupported == true)
        let flipped = try await decoded(.bool(false), .bool(true), nonceSupported: .bool(false))
        #expect(flipped.emailVerified == false)
        #expect(flipped.isPrivateEmail == true)
        #expect(flipped.nonceSupported == false)
    }

    @Test func numbersAndOtherStringsAreNotBooleans() async throws {
        let claims = try await decoded(.int(1), .int(0), nonceSupported: .int(1))
        #expect(claims.emailVerified == nil)
        #expect(claims.isPrivateEmail == nil)
        #expect(claims.nonceSupported == nil)
        let decimals = try await decoded(.decimal(1.0), .decimal(0.0))
        #expect(decimals.emailVerified == nil)
        #expect(decimals.isPrivateEmail == nil)
        let strings = try await decoded(.string("TRUE"), .string("1"), nonceSupported: .string("yes"))
        #expect(strings.emailVerified == nil)
        #expect(strings.isPrivateEmail == nil)
        #expect(strings.nonceSupported == nil)
    }

    @Test func theFlagHelperDirectly() throws {
        func flag(_ json: String) throws -> Bool? {
            IdentityClaims.flag(try JSONValue.parse(Data("{\"v\":\(json)}".utf8))["v"])
        }
        #expect(try flag("true") == true)
        #expect(try flag("false") == false)
        #expect(try flag("\"true\"") == true)
        #expect(try flag("\"false\"") == false)
        #expect(try flag("1") == nil)
        #expect(try flag("0") == nil)
        #expect(try flag("1.0") == nil)
        #expect(try flag("null") == nil)
        #expect(try flag("\"True\"") == nil)
        #expect(IdentityClaims.flag(nil) == nil)
    }

    @Test func realUserStatusAndTransferSubjectDecode() async throws {
        let apple = try F.apple()
        let token = try apple.mint(F.claims(apple, extra: ["real_user_status": .int(1), "transfer_sub": .string("001234.transfer")]))
        let claims = try await F.verifier(for: apple).verify(token, nonce: .none, at: F.now)
        #expect(claims.realUserStatus == 1)
        #expect(claims.transferSubject == "001234.transfer")
    }
}

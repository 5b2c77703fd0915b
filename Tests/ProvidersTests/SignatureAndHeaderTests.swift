import BrokerCore
import Foundation
import JWTKit
import MockIdP
import Testing

@testable import Providers

/// A good token, and the signature and header rules (RFC 8725): checked before any claim.
@Suite struct SignatureAndHeaderTests {
    typealias F = VerifierFixture

    @Test func aGoodTokenVerifiesAndItsClaimsDecode() async throws {
        let apple = try F.apple()
        let verifier = try F.verifier(for: apple)
        let token = try apple.mint(F.claims(apple, email: "relay@privaterelay.appleid.com", extra: ["is_private_email": .bool(true)]))

        let claims = try await verifier.verify(token, nonce: .none, at: F.now)
        #expect(claims.issuer == "https://appleid.apple.com")
        #expect(claims.subject == F.subject)
        #expect(claims.audiences == [F.clientID])
        #expect(claims.email == "relay@privaterelay.appleid.com")
        #expect(claims.emailVerified == true)
        #expect(claims.isPrivateEmail == true)
        #expect(claims.realUserStatus == 2)
        #expect(claims.nonceSupported == true)
        #expect(claims.nonce == nil)
        #expect(claims.issuedAt == F.now)
        #expect(claims.expiresAt == F.now.addingTimeInterval(600))

        let report = await verifier.check(token, nonce: .none, at: F.now)
        #expect(report.isValid)
        #expect(report.checks.allSatisfy { $0.passed })
        #expect(
            report.checks.map(\.name) == [
                "size", "structure", "alg", "header", "kid", "signature", "iss", "aud", "sub", "iat", "exp", "nonce",
            ])
    }

    @Test func aGoodTokenWithoutEmailVerifies() async throws {
        let apple = try F.apple()
        let claims = try await F.verifier(for: apple).verify(try apple.mint(F.claims(apple, email: nil)), nonce: .none, at: F.now)
        #expect(claims.email == nil)
        #expect(claims.emailVerified == nil)
        #expect(claims.isPrivateEmail == nil)
    }

    @Test func aBadSignatureIsRefused() async throws {
        let apple = try F.apple()
        let token = try apple.mint(F.claims(apple), forgery: .badSignature)
        let verifier = try F.verifier(for: apple)
        #expect(await verifier.failureCode(token) == "invalid_token")
        #expect(await verifier.failedCheck(token) == "signature")
    }

    @Test func aTamperedPayloadIsRefused() async throws {
        let apple = try F.apple()
        let token = try apple.mint(F.claims(apple))
        var parts = token.split(separator: ".").map(String.init)
        parts[1] = Base64URL.encode(Data(try F.json(apple.claims(subject: "someone-else", audience: F.clientID, issuedAt: F.now)).utf8))
        let verifier = try F.verifier(for: apple)
        #expect(await verifier.failureCode(parts.joined(separator: ".")) == "invalid_token")
        #expect(await verifier.failedCheck(parts.joined(separator: ".")) == "signature")
    }

    @Test func algNoneIsRefused() async throws {
        let apple = try F.apple()
        let token = try apple.mint(F.claims(apple), forgery: .algNone)
        let verifier = try F.verifier(for: apple)
        // With its empty signature segment the token is already malformed…
        #expect(await verifier.failureCode(token) == "invalid_token")
        #expect(await verifier.failedCheck(token) == "structure")
        // …and with a non-empty (garbage) signature segment the alg rule refuses it.
        let withSignature = token + Base64URL.encode(Data("x".utf8))
        #expect(await verifier.failureCode(withSignature) == "invalid_token")
        #expect(await verifier.failedCheck(withSignature) == "alg")
    }

    @Test func hs256KeyedWithThePublicKeyIsRefused() async throws {
        let apple = try F.apple()
        let token = try apple.mint(F.claims(apple), forgery: .hs256WithPublicKey)
        #expect(try F.segment(token, 0)["alg"] as? String == "HS256")
        let verifier = try F.verifier(for: apple)
        #expect(await verifier.failureCode(token) == "invalid_token")
        #expect(await verifier.failedCheck(token) == "alg")
    }

    @Test func otherAlgorithmsAndAMissingAlgAreRefused() async throws {
        let apple = try F.apple()
        let verifier = try F.verifier(for: apple)
        for alg: JWTHeaderField in [.string("RS512"), .string("PS256"), .string("rs256"), .string(""), .null, .int(256)] {
            let token = try apple.mint(F.claims(apple), header: ["alg": alg])
            #expect(await verifier.failureCode(token) == "invalid_token", "alg \(alg)")
            #expect(await verifier.failedCheck(token) == "alg", "alg \(alg)")
        }
        var header = F.header(apple)
        header["alg"] = nil
        let token = try apple.mint(rawHeader: Data(try F.json(header).utf8), rawPayload: Data(try F.json(F.claims(apple)).utf8))
        #expect(await verifier.failureCode(token) == "invalid_token")
        #expect(await verifier.failedCheck(token) == "alg")
    }

    @Test func anUnknownKidIsRefused() async throws {
        let apple = try F.apple()
        let token = try apple.mint(F.claims(apple), forgery: .unpublishedKey)
        #expect(try F.segment(token, 0)["kid"] as? String == "not-published")
        let verifier = try F.verifier(for: apple)
        #expect(await verifier.failureCode(token) == "unknown_key")
        #expect(await verifier.failedCheck(token) == "kid")
    }

    @Test func aKnownKidWithAnotherKeysSignatureIsRefused() async throws {
        // Signed by the stranger key but naming the published kid: the signature fails.
        let apple = try F.apple()
        let token = try apple.mint(F.claims(apple), header: ["kid": .string(apple.currentKeyID)], forgery: .unpublishedKey)
        let verifier = try F.verifier(for: apple)
        #expect(await verifier.failureCode(token) == "invalid_token")
        #expect(await verifier.failedCheck(token) == "signature")
    }

    @Test func aMissingKidIsRefused() async throws {
        let apple = try F.apple()
        let verifier = try F.verifier(for: apple)
        var header = F.header(apple)
        header["kid"] = nil
        let token = try apple.mint(rawHeader: Data(try F.json(header).utf8), rawPayload: Data(try F.json(F.claims(apple)).utf8))
        #expect(await verifier.failureCode(token) == "invalid_token")
        #expect(await verifier.failedCheck(token) == "kid")

        for kid: JWTHeaderField in [.null, .string(""), .int(1)] {
            let token = try apple.mint(F.claims(apple), header: ["kid": kid])
            #expect(await verifier.failureCode(token) == "invalid_token", "kid \(kid)")
            #expect(await verifier.failedCheck(token) == "kid", "kid \(kid)")
        }
    }

    /// Each of these headers would let the token choose its own key (or demand processing we do
    /// not do): refused even on a token that is otherwise valid and correctly signed.
    @Test(arguments: [
        ("jku", JWTHeaderField.string("https://attacker.example/keys")),
        ("x5u", .string("https://attacker.example/cert.pem")),
        ("jwk", .object(["kty": .string("RSA"), "n": .string("AQAB"), "e": .string("AQAB")])),
        ("x5c", .array([.string("MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA")])),
        ("crit", .array([.string("exp")])),
        ("crit", .array([])),
    ])
    func keyChoosingAndCriticalHeadersAreRefused(name: String, value: JWTHeaderField) async throws {
        let apple = try F.apple()
        let verifier = try F.verifier(for: apple)
        let token = try apple.mint(F.claims(apple), header: [name: value])
        #expect(try F.segment(token, 0)[name] != nil)
        #expect(await verifier.failureCode(token) == "invalid_token")
        #expect(await verifier.failedCheck(token) == "header")
        // The same token without the header verifies: the header alone caused the refusal.
        #expect(await verifier.failureCode(try apple.mint(F.claims(apple))) == nil)
    }
}

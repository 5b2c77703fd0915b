import BrokerCore
import Crypto
import Foundation
import Testing

/// A refresh token's successor is derived from it under a server key (decision 0017).
@Suite struct RefreshTokenTests {
    @Test func theSuccessorIsTheSameForTheSameTokenAndKeyAndParsesAsAToken() throws {
        let key = SymmetricKey(size: .bits256)
        let token = RefreshToken.generate(sessionID: UUID())
        let successor = token.successor(key: key)
        #expect(successor.value == token.successor(key: key).value)
        #expect(successor.value != token.value)
        #expect(RefreshToken(parsing: successor.value)?.value == successor.value)
        #expect(successor.successor(key: key).value != successor.value)
    }

    @Test func anotherKeyOrAnotherTokenGivesAnotherSuccessor() {
        let token = RefreshToken.generate(sessionID: UUID())
        let key = SymmetricKey(size: .bits256)
        #expect(token.successor(key: key).value != token.successor(key: SymmetricKey(size: .bits256)).value)
        #expect(token.successor(key: key).value != RefreshToken.generate(sessionID: UUID()).successor(key: key).value)
    }

    @Test func derivedKeysDependOnTheirPurposeAndTheMasterKey() throws {
        let master = MasterKey.generate()
        let box = SecretBox(masterKey: master.key)
        let again = SecretBox(masterKey: try MasterKey(base64: master.base64))
        let token = RefreshToken.generate(sessionID: UUID())
        #expect(
            token.successor(key: box.derivedKey(purpose: "refresh-token-successor")).value
                == token.successor(key: again.derivedKey(purpose: "refresh-token-successor")).value)
        #expect(
            token.successor(key: box.derivedKey(purpose: "refresh-token-successor")).value
                != token.successor(key: box.derivedKey(purpose: "other")).value)
        let stranger = SecretBox(masterKey: MasterKey.generate().key)
        #expect(
            token.successor(key: box.derivedKey(purpose: "refresh-token-successor")).value
                != token.successor(key: stranger.derivedKey(purpose: "refresh-token-successor")).value)
    }

    @Test func aTokenNamesItsSessionAndItsSuccessorsKeepIt() throws {
        let session = UUID()
        let key = SymmetricKey(size: .bits256)
        let token = RefreshToken.generate(sessionID: session)
        #expect(token.sessionID == session)
        #expect(RefreshToken(parsing: token.value)?.sessionID == session)
        let successor = token.successor(key: key)
        #expect(successor.sessionID == session)
        #expect(RefreshToken(parsing: successor.value)?.sessionID == session)
        #expect(successor.successor(key: key).sessionID == session)
    }

    @Test func tokensIssuedBeforeNameNoSessionAndNeitherDoTheirSuccessors() throws {
        // `ibr_` + base64url(32 bytes): the format before decision 0027.
        let legacy = try #require(RefreshToken(parsing: "ibr_" + Base64URL.encode([UInt8](repeating: 7, count: 32))))
        #expect(legacy.sessionID == nil)
        let successor = legacy.successor(key: SymmetricKey(size: .bits256))
        #expect(successor.sessionID == nil)
        #expect(successor.value.utf8.count == 47)
        #expect(RefreshToken(parsing: successor.value) != nil)
    }

    @Test func onlyTheTwoCanonicalShapesParse() {
        let token = RefreshToken.generate(sessionID: UUID()).value
        for junk in [
            "", "ibr_", String(token.dropLast()), token + "A", "ibx_" + token.dropFirst(4),
            token.replacingOccurrences(of: "ibr_", with: "IBR_"),
            "ibr_" + String(repeating: "*", count: 64), "ibr_" + String(repeating: "A", count: 63) + "=",
        ] {
            #expect(RefreshToken(parsing: junk) == nil, "\(junk)")
        }
        // The last character of 48 bytes in base64url carries no padding bits: any letter of the
        // alphabet there is a distinct token, and the canonical spelling is checked.
        #expect(RefreshToken(parsing: token) != nil)
    }
}

/// A relying party's first refresh token is derived from its authorization code (decision
/// 0085): the same code and key give the same token, which names its session and parses as any
/// other; another code or key gives another.
@Suite struct DerivedRefreshTokenTests {
    @Test func theSameCodeGivesTheSameTokenOfItsSession() throws {
        let key = SymmetricKey(size: .bits256)
        let session = UUID()
        let token = RefreshToken.derived(sessionID: session, from: "code-1", key: key)
        #expect(token.value == RefreshToken.derived(sessionID: session, from: "code-1", key: key).value)
        #expect(try #require(RefreshToken(parsing: token.value)).sessionID == session)
        #expect(token.value != RefreshToken.derived(sessionID: session, from: "code-2", key: key).value)
        #expect(token.value != RefreshToken.derived(sessionID: session, from: "code-1", key: SymmetricKey(size: .bits256)).value)
    }
}

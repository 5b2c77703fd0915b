import BrokerCore
import Crypto
import Foundation
import Testing

/// A refresh token's successor is derived from it under a server key (decision 0017).
@Suite struct RefreshTokenTests {
    @Test func theSuccessorIsTheSameForTheSameTokenAndKeyAndParsesAsAToken() throws {
        let key = SymmetricKey(size: .bits256)
        let token = RefreshToken.generate()
        let successor = token.successor(key: key)
        #expect(successor.value == token.successor(key: key).value)
        #expect(successor.value != token.value)
        #expect(RefreshToken(parsing: successor.value)?.value == successor.value)
        #expect(successor.successor(key: key).value != successor.value)
    }

    @Test func anotherKeyOrAnotherTokenGivesAnotherSuccessor() {
        let token = RefreshToken.generate()
        let key = SymmetricKey(size: .bits256)
        #expect(token.successor(key: key).value != token.successor(key: SymmetricKey(size: .bits256)).value)
        #expect(token.successor(key: key).value != RefreshToken.generate().successor(key: key).value)
    }

    @Test func derivedKeysDependOnTheirPurposeAndTheMasterKey() throws {
        let master = MasterKey.generate()
        let box = SecretBox(masterKey: master.key)
        let again = SecretBox(masterKey: try MasterKey(base64: master.base64))
        let token = RefreshToken.generate()
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
}

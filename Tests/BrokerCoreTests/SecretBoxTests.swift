import BrokerCore
import Foundation
import Testing

@Suite struct SecretBoxTests {
    let box = SecretBox(masterKey: MasterKey.generate().key)

    @Test func sealsAndOpens() throws {
        let sealed = try box.seal(Data("secret".utf8), context: "row:1")
        #expect(!sealed.contains(Data("secret".utf8)))
        #expect(try box.open(sealed, context: "row:1", what: "test") == Data("secret".utf8))
    }

    @Test func sealingIsRandomized() throws {
        let one = try box.seal(Data("same".utf8), context: "c")
        let two = try box.seal(Data("same".utf8), context: "c")
        #expect(one != two)
    }

    @Test func aCiphertextMovedToAnotherRowDoesNotOpen() throws {
        let sealed = try box.seal(Data("secret".utf8), context: "row:1")
        #expect(throws: BrokerError.self) { try box.open(sealed, context: "row:2", what: "test") }
    }

    @Test func anotherMasterKeyCannotOpen() throws {
        let sealed = try box.seal(Data("secret".utf8), context: "c")
        let other = SecretBox(masterKey: MasterKey.generate().key)
        #expect(throws: BrokerError.self) { try other.open(sealed, context: "c", what: "test") }
    }

    @Test func tamperedCiphertextDoesNotOpen() throws {
        var sealed = try box.seal(Data("secret".utf8), context: "c")
        sealed[sealed.count - 1] ^= 0x01
        #expect(throws: BrokerError.self) { try box.open(sealed, context: "c", what: "test") }
    }

    @Test(arguments: ["", "not base64!", Data(count: 16).base64EncodedString(), Data(count: 33).base64EncodedString()])
    func masterKeyMustBe32Bytes(_ value: String) {
        #expect(throws: BrokerError.self) { try MasterKey(base64: value) }
    }

    @Test func masterKeyAcceptsBase64Of32Bytes() throws {
        let (_, base64) = MasterKey.generate()
        _ = try MasterKey(base64: base64 + "\n")
    }
}

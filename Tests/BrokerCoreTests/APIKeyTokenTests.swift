import BrokerCore
import Foundation
import Testing

@Suite struct APIKeyTokenTests {
    @Test func generatedKeysParseAndHaveAStablePrefix() throws {
        let token = APIKeyToken.generate()
        #expect(token.value.hasPrefix("ibk_"))
        #expect(token.value.count == 48)
        let parsed = try #require(APIKeyToken(parsing: token.value))
        #expect(parsed.hash == token.hash)
        #expect(token.prefix.count == 12)
        #expect(token.value.hasPrefix(token.prefix))
        #expect(token.hash.count == 32)
    }

    @Test func keysAreUnique() {
        let keys = Set((0..<1000).map { _ in APIKeyToken.generate().value })
        #expect(keys.count == 1000)
    }

    @Test(arguments: [
        "", "ibk_", "Bearer x", "xyz_abcdefgh_0123456789012345678901234567890123",
        "ibk_abcdefgh-0123456789012345678901234567890123", "ibk_abcdefgh_012345678901234567890123456789012345",
        "ibk_abcdefgh_012345678901234567890123456789012'", "ibk_abc defg_0123456789012345678901234567890123",
    ])
    func malformedKeysAreRejected(_ value: String) {
        #expect(APIKeyToken(parsing: value) == nil)
    }

    @Test func scopesParseAndDefaultToAll() throws {
        #expect(try APIKeyScope.parseList([]) == APIKeyScope.allCases)
        #expect(try APIKeyScope.parseList(["sessions,tenant"]) == [.sessions, .tenant])
        #expect(try APIKeyScope.parseList(["tenant", "tenant"]) == [.tenant])
        #expect(throws: BrokerError.self) { try APIKeyScope.parseList(["admin"]) }
    }
}

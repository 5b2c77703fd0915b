import BrokerCore
import Foundation
import JWTKit
import Testing

@testable import BrokerServer

@Suite struct AccessTokenJSONTests {
    func claims(audiences: [String], clientID: String?, issuer: String = "https://broker.example/t/acme") -> AccessTokenClaims {
        let now = Date(timeIntervalSince1970: 1_795_237_158)
        return AccessTokenClaims(
            iss: .init(value: issuer), sub: .init(value: UUID().uuidString.lowercased()), aud: .init(value: audiences),
            exp: .init(value: now.addingTimeInterval(900)), iat: .init(value: now), jti: .init(value: UUID().uuidString.lowercased()),
            sid: UUID().uuidString.lowercased(), idp: "apple", amr: ["apple"], clientID: clientID)
    }

    /// The hand-written claims decode to exactly what jwt-kit's default encoder wrote.
    @Test(arguments: [
        (["acme"], "com.acme.app" as String?), (["acme", "acme-admin"], nil), (["a\"b\\c"], "ünï ✓\n"),
    ])
    func matchesTheDefaultEncoder(audiences: [String], clientID: String?) throws {
        let value = claims(audiences: audiences, clientID: clientID, issuer: "https://broker.example/t/a\"b")
        let fast = try AccessTokenJSONEncoder().encode(value)
        let stock = try (JSONEncoder.defaultForJWT).encode(value)
        let fastObject = try #require(try JSONSerialization.jsonObject(with: fast) as? NSDictionary)
        let stockObject = try #require(try JSONSerialization.jsonObject(with: stock) as? NSDictionary)
        #expect(fastObject == stockObject)
        #expect(try JSONDecoder.defaultForJWT.decode(AccessTokenClaims.self, from: fast) == value)
    }

    @Test func otherValuesGoThroughTheDefaultEncoder() throws {
        var header = JWTHeader()
        header.typ = "at+jwt"
        header.kid = "k1"
        let encoded = try AccessTokenJSONEncoder().encode(header)
        let object = try #require(try JSONSerialization.jsonObject(with: encoded) as? [String: String])
        #expect(object == ["typ": "at+jwt", "kid": "k1"])
    }

    /// A token signed through the collection with this encoder verifies with a stock collection.
    @Test func signedTokensVerifyWithAStockCollection() async throws {
        let key = ES256PrivateKey()
        let signing = JWTKeyCollection()
        await signing.add(ecdsa: key, kid: "k1", serializer: DefaultJWTSerializer(jsonEncoder: AccessTokenJSONEncoder()))
        let stock = JWTKeyCollection()
        await stock.add(ecdsa: key.publicKey, kid: "k1")
        let value = claims(audiences: ["acme"], clientID: "com.acme.app")
        let token = try await signing.sign(value, kid: "k1")
        let verified = try await stock.verify(token, as: AccessTokenClaims.self)
        #expect(verified == value)
        // The payload is the writer's text (the default encoder would have escaped the
        // issuer's slashes).
        let payload = try #require(Base64URL.decode(String(token.split(separator: ".")[1])))
        #expect(payload == Data(value.json))
    }
}

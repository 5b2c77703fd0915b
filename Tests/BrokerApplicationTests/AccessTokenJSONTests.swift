import BrokerCore
import Foundation
import JWTKit
import Testing

@testable import BrokerApplication

@Suite struct AccessTokenJSONTests {
    func claims(
        audiences: [String], clientID: String?, issuer: String = "https://broker.example/t/acme",
        now: Date = Date(timeIntervalSince1970: 1_795_237_158)
    ) -> AccessTokenClaims {
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

    @Test func headersOfStringsAreWrittenOthersGoThroughTheDefaultEncoder() throws {
        var header = JWTHeader()
        header.typ = "at+jwt"
        header.kid = "k\"1"
        header.alg = "ES256"
        let written = try AccessTokenJSONEncoder().encode(header)
        #expect(String(decoding: written, as: UTF8.self) == #"{"alg":"ES256","kid":"k\"1","typ":"at+jwt"}"#)
        header.fields["x5t#n"] = .int(3)
        let encoded = try AccessTokenJSONEncoder().encode(header)
        let object = try #require(try JSONSerialization.jsonObject(with: encoded) as? NSDictionary)
        #expect(object == ["typ": "at+jwt", "kid": "k\"1", "alg": "ES256", "x5t#n": 3] as NSDictionary)
    }

    /// A token signed through the collection with this encoder verifies with a stock collection.
    @Test func signedTokensVerifyWithAStockCollection() async throws {
        let key = ES256PrivateKey()
        let signing = JWTKeyCollection()
        await signing.add(ecdsa: key, kid: "k1", serializer: DefaultJWTSerializer(jsonEncoder: AccessTokenJSONEncoder()))
        let stock = JWTKeyCollection()
        await stock.add(ecdsa: key.publicKey, kid: "k1")
        // Not expired when verified: issued now, in whole seconds as the broker issues them.
        let value = claims(
            audiences: ["acme"], clientID: "com.acme.app", now: Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down)))
        let token = try await signing.sign(value, kid: "k1")
        let verified = try await stock.verify(token, as: AccessTokenClaims.self)
        #expect(verified == value)
        // The payload is the writer's text (the default encoder would have escaped the
        // issuer's slashes).
        let payload = try #require(Base64URL.decode(String(token.split(separator: ".")[1])))
        #expect(payload == Data(value.json))
    }

    /// An ID token's hand-written claims decode to exactly what jwt-kit's default encoder wrote,
    /// with every optional claim present or absent, one audience or two, and text to escape.
    @Test(arguments: [false, true], [["web"], ["web", "other\"x"]])
    func idTokenClaimsMatchTheDefaultEncoder(optionalsSet: Bool, audiences: [String]) throws {
        let now = Date(timeIntervalSince1970: 1_795_237_158)
        let value = IDTokenClaims(
            iss: .init(value: "https://broker.example/t/a\"b"), sub: .init(value: UUID().uuidString.lowercased()),
            aud: .init(value: audiences), exp: .init(value: now.addingTimeInterval(900)), iat: .init(value: now),
            authTime: 1_795_237_100, nonce: optionalsSet ? "n\u{0}ö" : nil, atHash: "h-_", idp: "apple", sid: "s",
            email: optionalsSet ? "a@example.com" : nil, emailVerified: optionalsSet ? false : nil,
            name: optionalsSet ? "Ada ✓\n" : nil, givenName: optionalsSet ? "Ada" : nil, familyName: optionalsSet ? "L" : nil)
        let fast = try AccessTokenJSONEncoder().encode(value)
        let stock = try (JSONEncoder.defaultForJWT).encode(value)
        let fastObject = try #require(try JSONSerialization.jsonObject(with: fast) as? NSDictionary)
        let stockObject = try #require(try JSONSerialization.jsonObject(with: stock) as? NSDictionary)
        #expect(fastObject == stockObject)
        #expect(try JSONDecoder.defaultForJWT.decode(IDTokenClaims.self, from: fast) == value)
    }
}

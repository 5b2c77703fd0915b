import BrokerAPI
import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Providers
import Testing

@testable import BrokerApplication
@testable import BrokerServer

/// The sign-in route is served outside the generated server code; these hold it to the same
/// contract: the generated types' JSON, and the same refusals of bodies that do not match.
@Suite struct AppleSignInRouteTests {
    static let now = Date(timeIntervalSince1970: 1_795_237_158)

    static let full = Components.Schemas.SignInResponse(
        account: .init(
            id: "5f52c1b1-07cb-41c1-8185-af479642caef", email: "a\"b@example.com", emailVerified: true, isPrivateEmail: true,
            name: .init(givenName: "Ådá \\ \n", familyName: "Lovelace"), status: .active, createdAt: now, lastSeenAt: now),
        identity: .init(
            id: "5060562a-d8da-407f-bc39-87dca042200b", provider: "apple", providerScope: "TEAM000001", subject: "001234.abc.0001",
            email: "x@privaterelay.appleid.com", emailVerified: true, isPrivateEmail: true, relayEmailDeliverable: false,
            realUserStatus: 2, hasProviderRefreshToken: true, createdAt: now, lastSignInAt: now.addingTimeInterval(61)),
        isNewAccount: true, linkedBy: "verified_email", possibleDuplicate: false,
        session: .init(accessToken: "eyJ.eyJ.sig", tokenType: .bearer, expiresIn: 900, refreshToken: "ibr_x"))

    static let sparse = Components.Schemas.SignInResponse(
        account: .init(
            id: "5f52c1b1-07cb-41c1-8185-af479642caef", email: nil, emailVerified: false, isPrivateEmail: false, name: .init(),
            status: .disabled, createdAt: now, lastSeenAt: nil),
        identity: .init(
            id: nil, provider: "google", providerScope: nil, subject: "s", email: nil, emailVerified: false, isPrivateEmail: false,
            relayEmailDeliverable: nil, realUserStatus: nil, hasProviderRefreshToken: nil, createdAt: now, lastSignInAt: nil),
        isNewAccount: false, linkedBy: nil, possibleDuplicate: true,
        session: .init(accessToken: "t", tokenType: .bearer, expiresIn: 60, refreshToken: "r"))

    /// What the generated server code writes: `Codable` through a JSONEncoder with the API's
    /// date transcoder.
    static func codableJSON(_ value: Components.Schemas.SignInResponse) throws -> Data {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(try ISO8601Transcoder().encode(date))
        }
        return try encoder.encode(value)
    }

    static let nameless = Components.Schemas.SignInResponse(
        account: .init(
            id: "5f52c1b1-07cb-41c1-8185-af479642caef", email: nil, emailVerified: false, isPrivateEmail: false, name: nil,
            status: .active, createdAt: now, lastSeenAt: nil),
        identity: sparse.identity, isNewAccount: true, linkedBy: nil, possibleDuplicate: false, session: sparse.session)

    @Test(arguments: [full, sparse, nameless])
    func responseJSONMatchesTheGeneratedEncoding(_ value: Components.Schemas.SignInResponse) throws {
        let direct = try #require(try JSONSerialization.jsonObject(with: Data(value.json)) as? NSDictionary)
        let generated = try #require(try JSONSerialization.jsonObject(with: try Self.codableJSON(value)) as? [String: Any])
        // The differences the contract asks for: `account.name`, `account.external_id` and
        // `linked_by` are always present, null when unknown (the synthesized conformance leaves
        // them out).
        var expected = generated
        if expected["linked_by"] == nil { expected["linked_by"] = NSNull() }
        var account = try #require(expected["account"] as? [String: Any])
        if account["name"] == nil { account["name"] = NSNull() }
        if account["external_id"] == nil { account["external_id"] = NSNull() }
        expected["account"] = account
        #expect(direct == expected as NSDictionary)
        if value.account.name == nil {
            #expect(String(decoding: value.json, as: UTF8.self).contains(#""name":null"#))
        }
        #expect(try JSONDecoder.iso8601.decode(Components.Schemas.SignInResponse.self, from: Data(value.json)) == value)
    }

    @Test func successHasJSONAndNoStore() async throws {
        try await AppleTestSetup.run { setup in
            let response = try await setup.post(
                "/v1/sign-in/apple", json: ["client_id": "com.acme.app", "identity_token": try setup.token(subject: "route-1")])
            #expect(response.status == .ok)
            #expect(response.headers[.contentType] == "application/json; charset=utf-8")
            #expect(response.headers[.cacheControl] == "no-store")
            #expect(response.headers[HTTPField.Name("X-Request-Id")!] != nil)
        }
    }

    @Test(arguments: [
        ("text/plain", #"{"client_id":"com.acme.app","identity_token":"x"}"#),
        ("application/json", #"{"client_id":"com.acme.app"}"#),
        ("application/json", #"{"client_id":"com.acme.app","identity_token":"x","intent":"sometimes"}"#),
        ("application/json", #"{"client_id":7,"identity_token":"x"}"#),
        ("application/json", #"not json"#),
        ("application/json", #"["client_id"]"#),
        ("application/json", ""),
    ])
    func bodiesOffTheContractAreInvalidRequests(contentType: String, body: String) async throws {
        try await AppleTestSetup.run { setup in
            let response = try await setup.client.execute(
                uri: "/v1/sign-in/apple", method: .post,
                headers: [.authorization: "Bearer \(setup.apiKey)", .contentType: contentType], body: ByteBuffer(string: body))
            #expect(response.status == .badRequest)
            #expect(response.headers[.contentType] == "application/problem+json")
            let problem = try response.json()
            #expect(problem["code"] as? String == "invalid_request")
            #expect((problem["detail"] as? String)?.contains("sometimes") != true, "values are not echoed")
        }
    }

    @Test(arguments: ["application/json", "Application/JSON; charset=utf-8", " application/json ;q=1", "*/*", "application/*"])
    func jsonContentTypesAreAccepted(_ value: String) throws {
        try SignInRoute.checkContentType(value)
    }

    @Test(arguments: ["text/json", "application/jsonx", "application/json-patch+json", "", ";application/json"])
    func otherContentTypesAreRefused(_ value: String) {
        #expect(throws: BrokerError.self) { try SignInRoute.checkContentType(value) }
    }

    @Test func noContentTypeIsTakenAsJSON() async throws {
        try await AppleTestSetup.run { setup in
            let body = try JSONSerialization.data(withJSONObject: [
                "client_id": "com.acme.app", "identity_token": try setup.token(subject: "route-2"),
            ])
            let response = try await setup.client.execute(
                uri: "/v1/sign-in/apple", method: .post, headers: [.authorization: "Bearer \(setup.apiKey)"],
                body: ByteBuffer(bytes: body))
            #expect(response.status == .ok)
        }
    }

    @Test func aValidBodyWithoutAnAPIKeyIsUnauthorized() async throws {
        try await AppleTestSetup.run { setup in
            let response = try await setup.client.execute(
                uri: "/v1/sign-in/apple", method: .post, headers: [.contentType: "application/json"],
                body: ByteBuffer(string: #"{"client_id":"com.acme.app","identity_token":"x"}"#))
            #expect(response.status == .unauthorized)
            #expect(response.headers[.wwwAuthenticate] != nil)
        }
    }
}

extension JSONDecoder {
    static var iso8601: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            try ISO8601Transcoder().decode(try decoder.singleValueContainer().decode(String.self))
        }
        return decoder
    }
}

/// What a sign-in body reads to, member for member: the proof's members, the intent and the
/// platform. Made from the descriptor's reader (``SignInBody/read(_:_:)``) and from the generated
/// `Decodable` type of the same body, so the two can be compared. Apple's `user.email` is not
/// carried by either (the contract ignores it: the token's email is used); both check its type.
struct ReadSignIn: Equatable, CustomStringConvertible {
    var idToken: String?
    var accessToken: String?
    var clientID: String?
    var nonce: String?
    var authorizationCode: String?
    var givenName: String?
    var familyName: String?
    var intent: String
    var platform: String?

    init(_ body: SignInBody) {
        idToken = body.proof.idToken
        accessToken = body.proof.accessToken
        clientID = body.proof.clientID
        nonce = body.proof.nonce
        authorizationCode = body.proof.authorizationCode
        givenName = body.proof.name.givenName
        familyName = body.proof.name.familyName
        intent = body.intent.rawValue
        platform = body.platform
    }

    init(_ request: Components.Schemas.AppleSignInRequest) {
        idToken = request.identityToken
        clientID = request.clientId
        nonce = request.nonce
        authorizationCode = request.authorizationCode
        givenName = request.user?.name?.firstName
        familyName = request.user?.name?.lastName
        intent = request.intent?.rawValue ?? "auto"
        platform = request.platform?.rawValue
    }

    init(_ request: Components.Schemas.GoogleSignInRequest) {
        idToken = request.idToken
        clientID = request.clientId
        nonce = request.nonce
        intent = request.intent?.rawValue ?? "auto"
        platform = request.platform?.rawValue
    }

    /// Facebook's limited-login token is its id token. (Exactly one token, and a nonce with a
    /// limited-login token, are rules the generated type does not hold; see
    /// ``FacebookSignInRequestReadingTests``.)
    init(_ request: Components.Schemas.FacebookSignInRequest) {
        idToken = request.limitedLoginToken
        accessToken = request.accessToken
        nonce = request.nonce
        intent = request.intent?.rawValue ?? "auto"
        platform = request.platform?.rawValue
    }

    var description: String {
        "\(idToken ?? "-") \(accessToken ?? "-") \(clientID ?? "-") \(nonce ?? "-") \(authorizationCode ?? "-") "
            + "\(givenName ?? "-") \(familyName ?? "-") \(intent) \(platform ?? "-")"
    }

    /// `text` read by `descriptor`'s reader, as the sign-in route reads it; nil when refused.
    static func direct(_ descriptor: ProviderDescriptor, _ text: String) -> ReadSignIn? {
        guard let json = try? JSONValue.parse(Data(text.utf8)), let body = try? SignInBody.read(descriptor, json) else { return nil }
        return ReadSignIn(body)
    }
}

/// Apple's reader (`AppleProvider.descriptor`, through ``SignInBody``) reads what the generated
/// `Decodable` conformance reads, member for member, and both refuse the same bodies
/// (duplicates aside: only the strict parser refuses them).
@Suite struct AppleSignInRequestReadingTests {
    func both(_ text: String) -> (direct: ReadSignIn?, generated: ReadSignIn?) {
        let generated = try? JSONDecoder().decode(Components.Schemas.AppleSignInRequest.self, from: Data(text.utf8))
        return (ReadSignIn.direct(AppleProvider.descriptor, text), generated.map(ReadSignIn.init))
    }

    @Test(arguments: [
        #"{"client_id":"c","identity_token":"t"}"#,
        #"{"client_id":"c","identity_token":"t","nonce":"n","authorization_code":"a","intent":"sign_up","platform":"ios"}"#,
        #"{"client_id":"c","identity_token":"t","user":{"name":{"firstName":"Ada","lastName":"L"},"email":"e@x"}}"#,
        #"{"client_id":"c","identity_token":"t","user":{"name":null},"nonce":null,"intent":null,"extra":{"x":[1]}}"#,
        #"{"client_id":"c","identity_token":"t","user":{}}"#,
        #"{"client_id":"c","identity_token":"t","user":{"name":{}}}"#,
        #"{"client_id":"c","identity_token":"t","intent":"sign_in","platform":"other"}"#,
    ])
    func validBodiesReadTheSame(_ text: String) throws {
        let (direct, generated) = both(text)
        #expect(direct != nil)
        #expect(direct == generated)
    }

    @Test(arguments: [
        #"{"client_id":"c"}"#, #"{"identity_token":"t"}"#, #"{"client_id":null,"identity_token":"t"}"#,
        #"{"client_id":1,"identity_token":"t"}"#, #"{"client_id":"c","identity_token":"t","nonce":5}"#,
        #"{"client_id":"c","identity_token":"t","intent":"maybe"}"#, #"{"client_id":"c","identity_token":"t","platform":"tv"}"#,
        #"{"client_id":"c","identity_token":"t","user":"u"}"#, #"{"client_id":"c","identity_token":"t","user":{"name":"n"}}"#,
        #"{"client_id":"c","identity_token":"t","user":{"name":{"firstName":1}}}"#,
        #"{"client_id":"c","identity_token":"t","user":{"email":false}}"#, #"[]"#, #""c""#,
    ])
    func invalidBodiesAreRefusedByBoth(_ text: String) {
        let (direct, generated) = both(text)
        #expect(direct == nil)
        #expect(generated == nil)
    }

    @Test func duplicateMembersAreRefused() {
        #expect(both(#"{"client_id":"a","client_id":"b","identity_token":"t"}"#).direct == nil)
    }
}

/// Google's reader, held to the generated `GoogleSignInRequest` the same way.
@Suite struct GoogleSignInRequestReadingTests {
    func both(_ text: String) -> (direct: ReadSignIn?, generated: ReadSignIn?) {
        let generated = try? JSONDecoder().decode(Components.Schemas.GoogleSignInRequest.self, from: Data(text.utf8))
        return (ReadSignIn.direct(GoogleProvider.descriptor, text), generated.map(ReadSignIn.init))
    }

    @Test(arguments: [
        #"{"id_token":"t"}"#, #"{"id_token":"t","client_id":"c","nonce":"n","intent":"sign_in","platform":"web"}"#,
        #"{"id_token":"t","client_id":null,"nonce":null,"intent":null,"platform":null,"extra":[1]}"#,
    ])
    func validBodiesReadTheSame(_ text: String) {
        let (direct, generated) = both(text)
        #expect(direct != nil)
        #expect(direct == generated)
    }

    @Test(arguments: [
        #"{}"#, #"{"id_token":null}"#, #"{"id_token":7}"#, #"{"id_token":"t","client_id":["c"]}"#, #"{"id_token":"t","nonce":{}}"#,
        #"{"id_token":"t","intent":"later"}"#, #"{"id_token":"t","platform":"IOS"}"#, #"[]"#, #"null"#,
    ])
    func invalidBodiesAreRefusedByBoth(_ text: String) {
        let (direct, generated) = both(text)
        #expect(direct == nil)
        #expect(generated == nil)
    }
}

/// Facebook's reader, held to the generated `FacebookSignInRequest`; beyond the generated type, it
/// takes exactly one token, and a nonce with a limited-login token (the schema's description).
@Suite struct FacebookSignInRequestReadingTests {
    func both(_ text: String) -> (direct: ReadSignIn?, generated: ReadSignIn?) {
        let generated = try? JSONDecoder().decode(Components.Schemas.FacebookSignInRequest.self, from: Data(text.utf8))
        return (ReadSignIn.direct(FacebookProvider.descriptor, text), generated.map(ReadSignIn.init))
    }

    @Test(arguments: [
        #"{"access_token":"a"}"#, #"{"access_token":"a","nonce":"n","intent":"sign_up","platform":"android"}"#,
        #"{"limited_login_token":"l","nonce":"n"}"#, #"{"limited_login_token":"l","nonce":"n","access_token":null,"x":1}"#,
    ])
    func validBodiesReadTheSame(_ text: String) {
        let (direct, generated) = both(text)
        #expect(direct != nil)
        #expect(direct == generated)
    }

    @Test(arguments: [
        #"{"access_token":5}"#, #"{"limited_login_token":true,"nonce":"n"}"#, #"{"access_token":"a","nonce":1}"#,
        #"{"access_token":"a","intent":"x"}"#, #"{"access_token":"a","platform":"tv"}"#, #"[]"#,
    ])
    func invalidBodiesAreRefusedByBoth(_ text: String) {
        let (direct, generated) = both(text)
        #expect(direct == nil)
        #expect(generated == nil)
    }

    @Test(arguments: [
        #"{}"#, #"{"access_token":"a","limited_login_token":"l","nonce":"n"}"#, #"{"limited_login_token":"l"}"#,
        #"{"limited_login_token":"l","nonce":""}"#,
    ])
    func theTokenRulesTheGeneratedTypeDoesNotHoldAreTheReaders(_ text: String) {
        let (direct, generated) = both(text)
        #expect(direct == nil)
        #expect(generated != nil)
    }
}

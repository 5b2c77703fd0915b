import BrokerApplication
import BrokerCore
import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import MockIdP
import NIOCore
import PostgresNIO
import Providers
import Storage
import TestSupport
import Testing

/// Sign in with Apple through a tenant's OpenID Provider (issue 42 §2): the relying party's
/// authorization request goes to Apple through the tenant's Services ID, Apple's `form_post`
/// comes back to the broker's own callback, the person goes on to the client's redirect URI
/// with `code`, `state` and `iss`, and the code opens a session of the same account a native
/// sign-in of the same Apple identity reaches.
@Suite(.timeLimit(.minutes(10))) struct OpenIDProviderAppleTests {
    static let redirectURI = "https://app.example.com/callback"

    /// The tenant's confidential client with ``redirectURI``.
    static func webClient(_ setup: AppleTestSetup) async throws -> ClientAdmin.Issued {
        try await ClientAdmin(database: setup.app.database, actor: "test").create(
            tenant: "acme", name: "web", redirectURIs: [redirectURI], isPublic: false, allowLoopback: false)
    }

    /// A browser that follows the broker's redirects on both its origins.
    static func browser(_ setup: AppleTestSetup) -> WebBrowser {
        WebBrowser(broker: setup.client, brokerOrigins: ["https://acme.example.com", TestApp.publicURL])
    }

    /// A plain authorization request of `issued` that goes straight to Apple.
    static func straightToApple(_ issued: ClientAdmin.Issued) -> [(String, String)] {
        [
            ("response_type", "code"), ("client_id", issued.client.clientID), ("redirect_uri", redirectURI), ("scope", "openid"),
            ("state", "x"), ("provider", "apple"),
        ]
    }

    @Test func anAppleSignInOfTheRelyingPartyIsTheNativeSignInsAccount() async throws {
        try await AppleTestSetup.run { setup in
            let subject = "000777.oidc0person0000000000000000.0001"
            setup.apple.webUser = MockAppleIdP.WebUser(subject: subject, email: "op@example.com", givenName: "Ada", familyName: "Lovelace")
            let native = try await setup.signIn([
                "client_id": "com.acme.app", "identity_token": try setup.token(subject: subject, email: "op@example.com"),
            ])
            let accountID = try #require(native[path: "account.id"] as? String)

            let issued = try await Self.webClient(setup)
            let verifier = Base64URL.encode(Data((0..<32).map { _ in UInt8.random(in: 0...255) }))
            let challenge = Base64URL.encode(Data(SHA256.hash(data: Data(verifier.utf8))))
            let fields = [
                ("response_type", "code"), ("client_id", issued.client.clientID), ("redirect_uri", Self.redirectURI),
                ("scope", "openid email profile"), ("state", "x"), ("nonce", "n"), ("code_challenge", challenge),
                ("code_challenge_method", "S256"), ("provider", "apple"),
            ]
            let browser = Self.browser(setup)
            let started = try await browser.visit("/t/acme/authorize?" + FormEncoding.encode(fields))
            #expect(started.status == 303)
            let authorize = try #require(started.location)
            #expect(WebBrowser.query(authorize)["response_mode"] == "form_post")
            let back = WebBrowser.query(try await browser.follow(authorize, until: Self.redirectURI))
            #expect(back["state"] == "x" && back["iss"] == "\(TestApp.publicURL)/t/acme")
            let code = try #require(back["code"])

            let response = try await setup.client.execute(
                uri: "/t/acme/token", method: .post,
                headers: [
                    .contentType: "application/x-www-form-urlencoded",
                    .authorization: "Basic " + Data("\(issued.client.clientID):\(try #require(issued.secret))".utf8).base64EncodedString(),
                ],
                body: ByteBuffer(
                    string: FormEncoding.encode([
                        ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", Self.redirectURI),
                        ("code_verifier", verifier),
                    ])))
            #expect(response.status == .ok, "\(String(buffer: response.body))")
            let idToken = try #require(try response.json()["id_token"] as? String)
            let payload = try #require(Base64URL.decode(String(idToken.split(separator: ".")[1])))
            let claims = try #require(try JSONSerialization.jsonObject(with: payload) as? [String: Any])
            #expect(claims["sub"] as? String == accountID, "the account the native sign-in reached")
            #expect(claims["idp"] as? String == "apple")
            #expect(claims["email"] as? String == "op@example.com")
            #expect(claims["name"] as? String == "Ada Lovelace")
            #expect(claims["nonce"] as? String == "n")

            // The REST API's web exchange cannot spend a relying party's code.
            let exchange = try await setup.post("/v1/sign-in/apple/web/exchange", json: ["code": code])
            #expect(try exchange.json()["code"] as? String == "invalid_grant")
        }
    }

    @Test func appleCancellingComesBackToTheClientAsAccessDenied() async throws {
        try await AppleTestSetup.run { setup in
            setup.apple.authorizeFault = .cancel
            let issued = try await Self.webClient(setup)
            let fields = Self.straightToApple(issued)
            let browser = Self.browser(setup)
            let back = WebBrowser.query(
                try await browser.follow("/t/acme/authorize?" + FormEncoding.encode(fields), until: Self.redirectURI))
            #expect(back["error"] == "access_denied", "\(back)")
            #expect(back["error_description"]?.isEmpty == false)
            #expect(back["state"] == "x" && back["iss"] == "\(TestApp.publicURL)/t/acme")
            #expect(back["code"] == nil)
        }
    }

    /// The Services ID serves the tenant's OpenID Provider without a return URL of the REST web
    /// flow's (the person goes back to the client's redirect URI): Apple is on the page and
    /// `provider=apple` goes to Apple, where before it vanished from the page without a word.
    @Test func aServicesIDWithoutAReturnURLStillServesTheRelyingParty() async throws {
        try await AppleTestSetup.run { setup in
            _ = try await setup.app.database.client.query("UPDATE apple_clients SET return_urls = '{}' WHERE client_id = 'com.acme.web'")
            await setup.app.services.invalidate(.appleClients, tenantID: nil)
            let issued = try await Self.webClient(setup)
            let options = try await setup.client.execute(
                uri: "/v1/login-options?platform=web", method: .get, headers: [.authorization: "Bearer \(setup.apiKey)"])
            #expect(!String(buffer: options.body).contains("/v1/sign-in/apple/web/start"), "the REST web flow has no return URL")
            let fields = [
                ("response_type", "code"), ("client_id", issued.client.clientID), ("redirect_uri", Self.redirectURI), ("scope", "openid"),
                ("state", "x"),
            ]
            let page = try await setup.client.execute(uri: "/t/acme/authorize?" + FormEncoding.encode(fields), method: .get)
            #expect(String(buffer: page.body).contains("Sign in with Apple"))
            let browser = Self.browser(setup)
            let back = WebBrowser.query(
                try await browser.follow(
                    "/t/acme/authorize?" + FormEncoding.encode(fields + [("provider", "apple")]), until: Self.redirectURI))
            #expect(back["code"]?.isEmpty == false, "\(back)")
            #expect(back["state"] == "x")
        }
    }

    /// The state answered by another callback while its person was at Apple's token endpoint
    /// (a claim that lapsed, decision 0069): the sign-in's statement keeps no code for it
    /// (decision 0100), the session it opened ends, and the person gets the plain page, not a
    /// code nobody could redeem.
    @Test func aStateAnsweredWhileItsSignInRunsHandsOutNoCodeAndEndsTheSession() async throws {
        try await AppleTestSetup.run { setup in
            let issued = try await Self.webClient(setup)
            let fields = Self.straightToApple(issued)
            let browser = Self.browser(setup)
            let started = try await browser.visit("/t/acme/authorize?" + FormEncoding.encode(fields))
            let apple = try #require(started.location)
            let form = try #require(WebBrowser.form(in: try await WebBrowser.get(apple).body))
            setup.apple.hold(.codeGrant)
            async let callback = browser.submit(action: form.action, fields: form.fields)
            await setup.apple.waitForArrivals(.codeGrant, count: 1)
            _ = try await setup.app.database.client.query(
                "UPDATE web_sign_in_states SET error = 'access_denied', claimed_until = NULL WHERE tenant_id = \(setup.tenant.id)")
            setup.apple.release(.codeGrant)
            let page = try await callback
            #expect(page.status == 400 && page.location == nil, "\(page)")
            var codes = -1
            for try await count in try await setup.app.database.client.query(
                "SELECT count(*)::int8 FROM web_sign_in_codes WHERE tenant_id = \(setup.tenant.id)"
            ).decode(Int.self) { codes = count }
            #expect(codes == 0)
            var sessions: [(Bool, String?)] = []
            for try await row in try await setup.app.database.client.query(
                "SELECT revoked_at IS NOT NULL, revoke_reason FROM sessions WHERE tenant_id = \(setup.tenant.id)"
            ).decode((Bool, String?).self) { sessions.append(row) }
            #expect(sessions.count == 1 && sessions.allSatisfy { $0.0 && $0.1 == "authorization_code_not_issued" }, "\(sessions)")
        }
    }
}

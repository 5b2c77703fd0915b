import BrokerApplication
import BrokerCore
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

/// The OpenID Connect authorization code flow (issue 22 §1, §3): PKCE, nonce and state,
/// `GET /oidc/callback`, the broker code and its exchange, against MockIdP's issuers.
@Suite(.timeLimit(.minutes(10))) struct OIDCWebSignInTests {
    static let returnURL = "https://shop.example.com/signed-in"
    static let secret = "line-web-secret"
    static let web: [String: [String]] = ["client-secret": [secret], "return-url": [returnURL]]

    static func run(_ test: @Sendable @escaping (OIDCTestSetup) async throws -> Void) async throws {
        try await OIDCTestSetup.run(lineValues: web) { setup in
            setup.line.registerWebClient(OIDCTestSetup.lineClient, secret: secret)
            try await test(setup)
        }
    }

    static func browser(_ setup: OIDCTestSetup) -> WebBrowser {
        WebBrowser(broker: setup.client, brokerOrigins: [TestApp.publicURL])
    }

    static func start(_ setup: OIDCTestSetup, provider: String = "line", state: String = "st", intent: String? = nil) async throws -> String
    {
        var body: [String: Any] = ["return_url": returnURL, "state": state]
        body["intent"] = intent
        let response = try await setup.post("/v1/sign-in/\(provider)/web/start", json: body)
        #expect(response.status == .ok, "\(String(buffer: response.body))")
        return try #require(try response.json()["authorize_url"] as? String)
    }

    static func signInOnTheWeb(_ setup: OIDCTestSetup, provider: String = "line") async throws -> [String: String] {
        let back = try await browser(setup).follow(try await start(setup, provider: provider), until: returnURL)
        #expect(!back.contains("eyJ") && !back.contains("@"))
        return WebBrowser.query(back)
    }

    static func identityCount(_ setup: OIDCTestSetup) async throws -> Int {
        let rows = try await setup.app.database.client.query("SELECT count(*)::int8 FROM identities")
        var count = 0
        for try await value in rows.decode(Int.self) { count = value }
        return count
    }

    @Test func theCodeFlowWithPKCESignsIn() async throws {
        try await Self.run { setup in
            let authorize = try await Self.start(setup)
            let query = WebBrowser.query(authorize)
            #expect(authorize.hasPrefix(setup.lineIssuer + "/authorize?"))
            #expect(query["response_type"] == "code")
            #expect(query["client_id"] == OIDCTestSetup.lineClient)
            #expect(query["redirect_uri"] == TestApp.publicURL + "/oidc/callback")
            #expect(query["code_challenge_method"] == "S256")
            #expect((query["code_challenge"]?.count ?? 0) == 43)
            #expect(query["scope"] == "openid email profile")

            let back = try await Self.browser(setup).follow(authorize, until: Self.returnURL)
            let returned = WebBrowser.query(back)
            #expect(returned["state"] == "st")
            let code = try #require(returned["code"])
            let response = try await setup.post("/v1/sign-in/line/web/exchange", json: ["code": code])
            #expect(response.status == .ok, "\(String(buffer: response.body))")
            let body = try response.json()
            #expect(body[path: "identity.provider"] as? String == "line")
            #expect(body[path: "identity.provider_scope"] as? String == setup.lineIssuer)
            #expect(body[path: "is_new_account"] as? Bool == true)
            #expect(body[path: "account.name.given_name"] as? String == "Web" || body[path: "account.name"] != nil)
            #expect(setup.line.webTokenRequests == 1)
            let replay = try await setup.post("/v1/sign-in/line/web/exchange", json: ["code": code])
            #expect(try replay.json()["code"] as? String == "invalid_grant")
        }
    }

    /// The callback refuses what the exchange would refuse, as Apple's does: `intent`
    /// `sign_in` for a person with no account, and a disabled account, come back as
    /// `error=account_not_found` / `account_disabled` with no code (issue 39 F15: the callback
    /// answered with a code and only the exchange refused).
    @Test func theCallbackRefusesAnUnknownPersonWithIntentSignInAndADisabledAccount() async throws {
        try await Self.run { setup in
            let unknown = WebBrowser.query(
                try await Self.browser(setup).follow(try await Self.start(setup, state: "s1", intent: "sign_in"), until: Self.returnURL))
            #expect(unknown["error"] == "account_not_found", "\(unknown)")
            #expect(unknown["code"] == nil && unknown["state"] == "s1")
            #expect(try await Self.identityCount(setup) == 0)

            let first = try await Self.signInOnTheWeb(setup)
            let code = try #require(first["code"])
            #expect(try await setup.post("/v1/sign-in/line/web/exchange", json: ["code": code]).status == .ok)
            _ = try await setup.app.database.client.query("UPDATE accounts SET status = 'disabled'")
            let disabled = WebBrowser.query(
                try await Self.browser(setup).follow(try await Self.start(setup, state: "s2"), until: Self.returnURL))
            #expect(disabled["error"] == "account_disabled", "\(disabled)")
            #expect(disabled["code"] == nil && disabled["state"] == "s2")
        }
    }

    @Test func aCodeDeliveredWithAnotherStateFailsItsPKCECheck() async throws {
        try await Self.run { setup in
            // The code of one start, brought back with the state of another: the broker redeems it
            // with the other's verifier, which the provider refuses.
            let first = try await WebBrowser.get(try await Self.start(setup, state: "a"))
            let second = try await WebBrowser.get(try await Self.start(setup, state: "b"))
            let firstLocation = try #require(first.location)
            let secondLocation = try #require(second.location)
            let code = try #require(WebBrowser.query(firstLocation)["code"])
            let otherState = try #require(WebBrowser.query(secondLocation)["state"])
            let crossed = try await Self.browser(setup).visit("/oidc/callback?code=\(code)&state=\(otherState)")
            #expect(crossed.status == 303)
            let crossedLocation = try #require(crossed.location)
            let returned = WebBrowser.query(crossedLocation)
            #expect(returned["error"] == "provider_refused")
            #expect(returned["state"] == "b")
            #expect(try await Self.identityCount(setup) == 0)
        }
    }

    @Test func accessDeniedGoesBackToTheReturnURL() async throws {
        try await Self.run { setup in
            setup.line.webAuthorizeFault = .deny
            let returned = try await Self.signInOnTheWeb(setup)
            #expect(returned["error"] == "access_denied")
            #expect(returned["state"] == "st")
            #expect(returned["code"] == nil)
            #expect(setup.line.webTokenRequests == 0)
        }
    }

    @Test func aWrongNonceIsAnInvalidToken() async throws {
        try await Self.run { setup in
            setup.line.webTokenFault = .wrongNonce
            let outcome = try await Self.signInOnTheWeb(setup)
            #expect(outcome["error"] == "invalid_token")
            #expect(try await Self.identityCount(setup) == 0)
        }
    }

    @Test func aTokenEndpointDownOrHangingIsProviderUnavailable() async throws {
        try await Self.run { setup in
            setup.line.webTokenFault = .status(502)
            let outcome = try await Self.signInOnTheWeb(setup)
            #expect(outcome["error"] == "provider_unavailable")
            // Hanging: the answer comes within BROKER_PROVIDER_TIMEOUT (5 s here).
            setup.line.webTokenFault = .hang
            let started = ContinuousClock.now
            let hung = try await Self.signInOnTheWeb(setup)
            #expect(hung["error"] == "provider_unavailable")
            #expect(ContinuousClock.now - started < .seconds(30))
            #expect(try await Self.identityCount(setup) == 0)
        }
    }

    @Test func aWrongSecretIsRefusedAndAudited() async throws {
        try await Self.run { setup in
            setup.line.registerWebClient(OIDCTestSetup.lineClient, secret: "rotated-at-the-provider")
            let outcome = try await Self.signInOnTheWeb(setup)
            #expect(outcome["error"] == "provider_refused")
            await setup.app.services.securityEvents.settled()
            let rows = try await setup.app.database.client.query(
                "SELECT details::text FROM audit_log WHERE action = 'web_sign_in.code_refused'")
            var details: [String] = []
            for try await text in rows.decode(String.self) { details.append(text) }
            #expect(details.count == 1)
            #expect(details.first?.contains("client-secret-file") == true)
        }
    }

    @Test func hs256TokensSignedWithTheSecretAreTakenFromTheTokenEndpointOnlyAndTheSecretGoesInTheForm() async throws {
        try await Self.run { setup in
            setup.yahoo.webHS256 = true
            // Its token endpoint takes the secret in the form only (client_secret_post).
            setup.yahoo.webAuthMethods = ["client_secret_post"]
            setup.yahoo.registerWebClient(OIDCTestSetup.yahooClient, secret: "yahoo-secret")
            try await setup.enable(
                "yahoo", issuer: setup.yahooIssuer, clientIDs: [OIDCTestSetup.yahooClient],
                extra: ["client-secret": ["yahoo-secret"], "return-url": [Self.returnURL], "scopes": ["openid profile"]])
            let returned = try await Self.signInOnTheWeb(setup, provider: "yahoo")
            let code = try #require(returned["code"], "\(returned)")
            let response = try await setup.post("/v1/sign-in/yahoo/web/exchange", json: ["code": code])
            #expect(response.status == .ok, "\(String(buffer: response.body))")
            // The same kind of token posted to the native route is refused.
            let hs256 = try MockOIDCIssuer.hs256(
                setup.yahoo.claims(base: setup.base, subject: "posted", audience: OIDCTestSetup.yahooClient), secret: "yahoo-secret")
            let native = try await setup.post("/v1/sign-in/yahoo", json: ["id_token": hs256])
            #expect(native.status == .unauthorized)
        }
    }

    @Test func theCallbackPagesShowNothing() async throws {
        try await Self.run { setup in
            for uri in ["/oidc/callback", "/oidc/callback?state=unknown&code=x", "/oidc/callback?error=access_denied"] {
                let page = try await Self.browser(setup).visit(uri)
                #expect(page.status == 400)
                #expect(!page.body.contains("eyJ") && !page.body.contains("@") && !page.body.contains("error"))
            }
            // An Apple state cannot be spent on the OIDC callback and the other way round.
            let state = try #require(WebBrowser.query(try await Self.start(setup))["state"])
            let apple = try await Self.browser(setup).submit(action: "/apple/callback", fields: [("state", state), ("code", "c")])
            #expect(apple.status == 400)
        }
    }

    @Test func loginOptionsNameTheStartEndpointOnceTheWebFlowIsOn() async throws {
        try await Self.run { setup in
            let response = try await setup.get("/v1/login-options?platform=web")
            let options = try #require(try response.json()["options"] as? [[String: Any]])
            let line = try #require(options.first { $0["provider"] as? String == "line" })
            #expect(line["start_endpoint"] as? String == "/v1/sign-in/line/web/start")
        }
    }
}

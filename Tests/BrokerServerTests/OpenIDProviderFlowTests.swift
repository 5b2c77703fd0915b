import BrokerApplication
import BrokerCore
import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import MockIdP
import NIOCore
import PostgresNIO
import Providers
import Storage
import TestSupport
import Testing

/// Each tenant an OpenID Provider (issue 42 §2, decision 0082): the authorization code flow with
/// PKCE through LINE (MockIdP's OIDC issuer), the token endpoint's grants, userinfo, the hosted
/// page, and what each endpoint refuses.
@Suite(.timeLimit(.minutes(10))) struct OpenIDProviderFlowTests {
    static let redirectURI = "https://app.example.com/callback"
    static let web: [String: [String]] = ["client-secret": ["line-web-secret"], "return-url": ["https://shop.example.com/signed-in"]]

    /// A tenant with LINE's web flow on and one confidential and one public client.
    struct Setup {
        let oidc: OIDCTestSetup
        let web: ClientAdmin.Issued
        let app: ClientAdmin.Issued

        var client: any TestClientProtocol { oidc.client }
        var browser: WebBrowser { WebBrowser(broker: oidc.client, brokerOrigins: [TestApp.publicURL]) }
        var issuer: String { "\(TestApp.publicURL)/t/acme" }
    }

    static func run(_ test: @Sendable @escaping (Setup) async throws -> Void) async throws {
        try await OIDCTestSetup.run(lineValues: web) { oidc in
            oidc.line.registerWebClient(OIDCTestSetup.lineClient, secret: "line-web-secret")
            let admin = ClientAdmin(database: oidc.app.database, actor: "test")
            let web = try await admin.create(
                tenant: "acme", name: "web", redirectURIs: [redirectURI], isPublic: false, allowLoopback: false)
            let app = try await admin.create(
                tenant: "acme", name: "ios", redirectURIs: ["com.example.app:/oauth2redirect"], isPublic: true, allowLoopback: false)
            try await test(Setup(oidc: oidc, web: web, app: app))
        }
    }

    struct PKCEPair {
        let verifier = Base64URL.encode(Data((0..<32).map { _ in UInt8.random(in: 0...255) }))
        var challenge: String { Base64URL.encode(Data(SHA256.hash(data: Data(verifier.utf8)))) }
    }

    static func authorizeURL(_ fields: [(String, String)], tenant: String = "acme") -> String {
        "/t/\(tenant)/authorize?" + FormEncoding.encode(fields)
    }

    static func request(
        client: String, redirectURI: String = redirectURI, scope: String = "openid email profile offline_access", state: String = "st-1",
        nonce: String? = "n-1", pkce: PKCEPair? = PKCEPair(), provider: String? = "line"
    ) -> [(String, String)] {
        var fields = [
            ("response_type", "code"), ("client_id", client), ("redirect_uri", redirectURI), ("scope", scope), ("state", state),
        ]
        if let nonce { fields.append(("nonce", nonce)) }
        if let pkce { fields += [("code_challenge", pkce.challenge), ("code_challenge_method", "S256")] }
        if let provider { fields.append(("provider", provider)) }
        return fields
    }

    /// Signs in through LINE from the authorization endpoint to the client's redirect URI: its query.
    static func code(_ setup: Setup, _ fields: [(String, String)], until returnURL: String = redirectURI) async throws -> [String: String] {
        WebBrowser.query(try await setup.browser.follow(authorizeURL(fields), until: returnURL))
    }

    static func token(_ setup: Setup, _ fields: [(String, String)], basic: (String, String)? = nil, tenant: String = "acme") async throws
        -> (Int, [String: Any])
    {
        var headers: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
        if let (id, secret) = basic {
            headers[.authorization] = "Basic " + Data("\(id):\(secret)".utf8).base64EncodedString()
        }
        let response = try await setup.client.execute(
            uri: "/t/\(tenant)/token", method: .post, headers: headers, body: ByteBuffer(string: FormEncoding.encode(fields)))
        #expect(response.headers[.cacheControl] == "no-store")
        #expect(response.headers[.contentType]?.hasPrefix("application/json") == true)
        return (Int(response.status.code), (try? response.json()) ?? [:])
    }

    static func claims(of jwt: String) throws -> [String: Any] {
        let parts = jwt.split(separator: ".")
        let payload = try #require(Base64URL.decode(String(parts[1])))
        return try #require(try JSONSerialization.jsonObject(with: payload) as? [String: Any])
    }

    static func sessionRevoked(_ setup: Setup, _ id: String) async throws -> Bool {
        let rows = try await setup.oidc.app.database.client.query(
            "SELECT revoked_at IS NOT NULL FROM sessions WHERE id = \(try #require(UUID(uuidString: id)))")
        for try await revoked in rows.decode(Bool.self) { return revoked }
        return false
    }

    // MARK: The flow

    @Test func aConfidentialClientSignsInRefreshesAndReadsUserinfo() async throws {
        try await Self.run { setup in
            let pkce = PKCEPair()
            let back = try await Self.code(setup, Self.request(client: setup.web.client.clientID, pkce: pkce))
            #expect(back["state"] == "st-1")
            #expect(back["iss"] == setup.issuer)
            let code = try #require(back["code"])

            let secret = try #require(setup.web.secret)
            let (status, body) = try await Self.token(
                setup,
                [
                    ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", Self.redirectURI),
                    ("code_verifier", pkce.verifier),
                ],
                basic: (setup.web.client.clientID, secret))
            #expect(status == 200, "\(body)")
            #expect(body["token_type"] as? String == "Bearer")
            #expect(body["scope"] as? String == "openid email profile offline_access")
            let accessToken = try #require(body["access_token"] as? String)
            let refreshToken = try #require(body["refresh_token"] as? String)
            let idToken = try #require(body["id_token"] as? String)

            // The ID token: signed with the tenant's key, for this client, with the request's nonce.
            let verified = try await setup.oidc.app.services.sessionTokens.keys.verifier(
                for: try #require(try await setup.oidc.app.database.tenants.find(slug: "acme"))
            )
            .verify(idToken, as: IDTokenClaims.self)
            #expect(verified.aud.value == [setup.web.client.clientID])
            #expect(verified.iss.value == setup.issuer)
            #expect(verified.nonce == "n-1")
            #expect(verified.idp == "line")
            #expect(verified.atHash == IDTokenClaims.accessTokenHash(accessToken))
            let account = verified.sub.value
            let claims = try Self.claims(of: idToken)
            #expect(claims["auth_time"] is Int)
            #expect(Self.claimsOfAccessToken(accessToken)["client_id"] as? String == setup.web.client.clientID)

            // Userinfo: the account, by the bearer token.
            let info = try await setup.client.execute(
                uri: "/t/acme/userinfo", method: .get, headers: [.authorization: "Bearer \(accessToken)"])
            #expect(info.status == .ok)
            #expect(try info.json()["sub"] as? String == account)

            // Refresh with client_secret_post: a new pair and a new ID token of the same person.
            let (refreshed, next) = try await Self.token(
                setup,
                [
                    ("grant_type", "refresh_token"), ("refresh_token", refreshToken), ("client_id", setup.web.client.clientID),
                    ("client_secret", secret),
                ])
            #expect(refreshed == 200, "\(next)")
            #expect(next["refresh_token"] as? String != refreshToken)
            #expect(try Self.claims(of: try #require(next["id_token"] as? String))["sub"] as? String == account)

            // The code again: refused, and the session it opened is ended.
            let (again, refusal) = try await Self.token(
                setup,
                [
                    ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", Self.redirectURI),
                    ("code_verifier", pkce.verifier),
                ],
                basic: (setup.web.client.clientID, secret))
            #expect(again == 400)
            #expect(refusal["error"] as? String == "invalid_grant")
            #expect(try await Self.sessionRevoked(setup, try #require(verified.sid as String?)))
            let ended = try await setup.client.execute(
                uri: "/t/acme/userinfo", method: .get, headers: [.authorization: "Bearer \(accessToken)"])
            #expect(ended.status == .unauthorized)
            #expect(ended.headers[.wwwAuthenticate]?.hasPrefix("Bearer error=\"invalid_token\"") == true)
        }
    }

    static func claimsOfAccessToken(_ token: String) -> [String: Any] { (try? claims(of: token)) ?? [:] }

    /// An authorization request replayed after it completed (issue 42 §5): the provider's
    /// callback sent again answers the same code while the code waits (a browser's repeat,
    /// decision 0069); once the code was redeemed, the replay is refused with a page and opens
    /// nothing.
    @Test func aCallbackReplayedAfterItsCodeWasRedeemedOpensNothing() async throws {
        try await Self.run { setup in
            let pkce = PKCEPair()
            let toProvider = try await setup.browser.visit(Self.authorizeURL(Self.request(client: setup.web.client.clientID, pkce: pkce)))
            let providerURL = try #require(toProvider.location)
            let callbackURL = try #require(try await setup.browser.visit(providerURL).location, "the provider sends the browser back")
            let first = try await setup.browser.visit(callbackURL)
            let back = try #require(first.location)
            let code = try #require(WebBrowser.query(back)["code"])
            let repeated = try await setup.browser.visit(callbackURL)
            #expect(WebBrowser.query(repeated.location ?? "")["code"] == code, "a repeat while the code waits: the same code")
            let (status, body) = try await Self.token(
                setup,
                [
                    ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", Self.redirectURI),
                    ("code_verifier", pkce.verifier),
                ],
                basic: (setup.web.client.clientID, try #require(setup.web.secret)))
            #expect(status == 200, "\(body)")
            let replayed = try await setup.browser.visit(callbackURL)
            #expect(replayed.status == 400 && replayed.location == nil, "\(replayed.status) \(replayed.location ?? "")")
            #expect(try await Self.openSessions(setup) == 1, "only the redeemed code's session")
        }
    }

    /// A disabled account through LINE, whose identity is known only once its code is redeemed:
    /// the sign-in statement refuses it (decision 0101), back at the client's URI as
    /// `access_denied` with `account_disabled`, no code, no session; a repeat of the callback
    /// answers the same; the account enabled again, the same person signs in to the same account.
    @Test func aDisabledAccountIsRefusedAtTheCallbackAndNothingOpens() async throws {
        try await Self.run { setup in
            let first = try await Self.code(setup, Self.request(client: setup.web.client.clientID))
            #expect(first["code"] != nil, "\(first)")
            let accounts = try await setup.oidc.app.database.client.query("SELECT id FROM accounts")
            var ids: [UUID] = []
            for try await id in accounts.decode(UUID.self) { ids.append(id) }
            let account = try #require(ids.first)
            #expect(ids.count == 1)
            _ = try await setup.oidc.app.database.client.query("UPDATE accounts SET status = 'disabled' WHERE id = \(account)")

            let toProvider = try await setup.browser.visit(
                Self.authorizeURL(Self.request(client: setup.web.client.clientID, state: "st-2")))
            let providerURL = try #require(toProvider.location)
            let callbackURL = try #require(try await setup.browser.visit(providerURL).location)
            let refused = try await setup.browser.visit(callbackURL)
            let back = WebBrowser.query(try #require(refused.location))
            #expect(back["error"] == "access_denied", "\(back)")
            #expect(back["error_description"]?.hasPrefix("account_disabled") == true, "\(back)")
            #expect(back["code"] == nil && back["state"] == "st-2" && back["iss"] == setup.issuer)
            #expect(try await Self.openSessions(setup) == 1, "only the first sign-in's session")
            let repeated = WebBrowser.query(try await setup.browser.visit(callbackURL).location ?? "")
            #expect(repeated["error"] == "access_denied" && repeated["code"] == nil, "\(repeated)")

            _ = try await setup.oidc.app.database.client.query("UPDATE accounts SET status = 'active' WHERE id = \(account)")
            let again = try await Self.code(setup, Self.request(client: setup.web.client.clientID, state: "st-3"))
            #expect(again["code"] != nil, "\(again)")
            #expect(try await Self.openSessions(setup) == 2)
            let after = try await setup.oidc.app.database.client.query("SELECT count(*)::int FROM accounts")
            for try await count in after.decode(Int.self) { #expect(count == 1, "the same account") }
        }
    }

    @Test func aPublicClientUsesPKCEAndGetsNoRefreshTokenWithoutOfflineAccess() async throws {
        try await Self.run { setup in
            let pkce = PKCEPair()
            let redirect = "com.example.app:/oauth2redirect"
            let back = try await Self.code(
                setup, Self.request(client: setup.app.client.clientID, redirectURI: redirect, scope: "openid", pkce: pkce), until: redirect)
            let code = try #require(back["code"])
            let (status, body) = try await Self.token(
                setup,
                [
                    ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirect), ("code_verifier", pkce.verifier),
                    ("client_id", setup.app.client.clientID),
                ])
            #expect(status == 200, "\(body)")
            #expect(body["refresh_token"] == nil)
            let claims = try Self.claims(of: try #require(body["id_token"] as? String))
            #expect(claims["email"] == nil, "no email without the email scope")

            // Without PKCE a public client is refused at the authorization endpoint, back at its URI.
            let refused = try await setup.browser.visit(
                Self.authorizeURL(Self.request(client: setup.app.client.clientID, redirectURI: redirect, pkce: nil)))
            #expect(refused.status == 303)
            let error = WebBrowser.query(try #require(refused.location))
            #expect(error["error"] == "invalid_request")
            #expect(error["state"] == "st-1" && error["iss"] == setup.issuer)
        }
    }

    // MARK: Refusals

    @Test func theTokenEndpointRefusesWhatDoesNotMatchAndNothingOpens() async throws {
        try await Self.run { setup in
            let secret = try #require(setup.web.secret)
            let basic = (setup.web.client.clientID, secret)
            func freshCode(_ pkce: PKCEPair) async throws -> String {
                try #require(try await Self.code(setup, Self.request(client: setup.web.client.clientID, pkce: pkce))["code"])
            }
            let pkce = PKCEPair()
            // A redirect URI that differs in one character.
            var (status, body) = try await Self.token(
                setup,
                [
                    ("grant_type", "authorization_code"), ("code", try await freshCode(pkce)), ("redirect_uri", Self.redirectURI + "/"),
                    ("code_verifier", pkce.verifier),
                ], basic: basic)
            #expect(status == 400 && body["error"] as? String == "invalid_grant")
            // A wrong verifier, and none.
            (status, body) = try await Self.token(
                setup,
                [
                    ("grant_type", "authorization_code"), ("code", try await freshCode(pkce)), ("redirect_uri", Self.redirectURI),
                    ("code_verifier", PKCEPair().verifier),
                ], basic: basic)
            #expect(status == 400 && body["error"] as? String == "invalid_grant")
            (status, body) = try await Self.token(
                setup, [("grant_type", "authorization_code"), ("code", try await freshCode(pkce)), ("redirect_uri", Self.redirectURI)],
                basic: basic)
            #expect(status == 400 && body["error"] as? String == "invalid_grant")
            // Another client's code: refused, and left for its own client.
            let code = try await freshCode(pkce)
            (status, body) = try await Self.token(
                setup,
                [
                    ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", Self.redirectURI),
                    ("code_verifier", pkce.verifier), ("client_id", setup.app.client.clientID),
                ])
            #expect(status == 400 && body["error"] as? String == "invalid_grant")
            // A wrong secret: 401 invalid_client.
            (status, body) = try await Self.token(
                setup,
                [
                    ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", Self.redirectURI),
                    ("code_verifier", pkce.verifier),
                ],
                basic: (setup.web.client.clientID, secret + "x"))
            #expect(status == 401 && body["error"] as? String == "invalid_client")
            // The client at another tenant's token endpoint: unknown there.
            (status, body) = try await Self.token(
                setup,
                [
                    ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", Self.redirectURI),
                    ("code_verifier", pkce.verifier),
                ],
                basic: basic, tenant: "bravo")
            #expect(status == 401 && body["error"] as? String == "invalid_client")
            // The person signed in at the provider's callback (decision 0085): each refused
            // redemption spent its code and ended the session the code named; the code another
            // client presented still waits, with its session, for its own client.
            #expect(try await Self.sessions(setup, revokedBecause: "authorization_code_refused") == 3)
            #expect(try await Self.openSessions(setup) == 1, "only the waiting code's session")
            // The code still works for its client.
            (status, body) = try await Self.token(
                setup,
                [
                    ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", Self.redirectURI),
                    ("code_verifier", pkce.verifier),
                ],
                basic: basic)
            #expect(status == 200, "\(body)")
            // Its refresh token is this client's: another client's attempt changes nothing.
            let refresh = try #require(body["refresh_token"] as? String)
            (status, body) = try await Self.token(
                setup, [("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", setup.app.client.clientID)])
            #expect(status == 400 && body["error"] as? String == "invalid_grant")
            (status, body) = try await Self.token(setup, [("grant_type", "refresh_token"), ("refresh_token", refresh)], basic: basic)
            #expect(status == 200, "\(body)")
            // An unsupported grant, a repeated parameter, a JSON body.
            (status, body) = try await Self.token(setup, [("grant_type", "password")], basic: basic)
            #expect(status == 400 && body["error"] as? String == "unsupported_grant_type")
            (status, body) = try await Self.token(setup, [("grant_type", "refresh_token"), ("grant_type", "refresh_token")], basic: basic)
            #expect(status == 400 && body["error"] as? String == "invalid_request")
        }
    }

    static func sessions(_ setup: Setup, revokedBecause reason: String) async throws -> Int {
        let rows = try await setup.oidc.app.database.client.query("SELECT count(*)::int8 FROM sessions WHERE revoke_reason = \(reason)")
        for try await count in rows.decode(Int.self) { return count }
        return -1
    }

    /// A code nobody redeemed (decision 0085): the session the person's sign-in opened at the
    /// callback ends when the sweep removes the expired code; nobody ever held its tokens, and
    /// its refresh token, derived from the code, refreshes nothing.
    @Test func aCodeNobodyRedeemsEndsItsSessionWhenItExpires() async throws {
        try await Self.run { setup in
            let code = try #require(
                try await Self.code(setup, Self.request(client: setup.web.client.clientID, pkce: PKCEPair()))["code"])
            #expect(try await Self.openSessions(setup) == 1, "the person signed in at the callback")
            let database = setup.oidc.app.database
            try await database.webSignIns.deleteExpired(before: Date())
            #expect(try await Self.openSessions(setup) == 1, "a waiting code keeps its session")
            let swept = try await database.webSignIns.deleteExpired(
                before: Date().addingTimeInterval(WebSignInService.codeLifetime + 1))
            #expect(swept == 1)
            #expect(try await Self.openSessions(setup) == 0)
            #expect(try await Self.sessions(setup, revokedBecause: "authorization_code_not_redeemed") == 1)
            // The code is gone with it.
            let (status, body) = try await Self.token(
                setup,
                [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", Self.redirectURI)],
                basic: (setup.web.client.clientID, try #require(setup.web.secret)))
            #expect(status == 400 && body["error"] as? String == "invalid_grant")
        }
    }

    /// A code presented twice at once (RFC 6749 §4.1.2), run many times behind a barrier: one
    /// answer is tokens, the other `invalid_grant`, and whichever came second ended the session
    /// the code named, so the tokens of the first die with it (decision 0085: the session exists
    /// before either redemption, so no order of the two leaves it open).
    @Test func aCodePresentedTwiceAtOnceEndsItsSessionWhicheverWins() async throws {
        try await Self.run { setup in
            let secret = try #require(setup.web.secret)
            for round in 0..<8 {
                let pkce = PKCEPair()
                let code = try #require(
                    try await Self.code(setup, Self.request(client: setup.web.client.clientID, state: "race-\(round)", pkce: pkce))["code"])
                let fields = [
                    ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", Self.redirectURI),
                    ("code_verifier", pkce.verifier),
                ]
                let barrier = Barrier(count: 2)
                // Each answer's status and ID token.
                let answers = try await withThrowingTaskGroup(of: (Int, String?).self) { group in
                    for _ in 0..<2 {
                        group.addTask {
                            await barrier.arrive()
                            let (status, body) = try await Self.token(setup, fields, basic: (setup.web.client.clientID, secret))
                            return (status, body["id_token"] as? String)
                        }
                    }
                    var answers: [(Int, String?)] = []
                    for try await answer in group { answers.append(answer) }
                    return answers
                }
                #expect(answers.map(\.0).sorted() == [200, 400], "round \(round)")
                let idToken = try #require(answers.first { $0.0 == 200 }?.1)
                let sid = try #require(try Self.claims(of: idToken)["sid"] as? String)
                #expect(try await Self.sessionRevoked(setup, sid), "round \(round): the session the code named is ended")
            }
            #expect(try await Self.openSessions(setup) == 0)
        }
    }

    static func openSessions(_ setup: Setup) async throws -> Int {
        let rows = try await setup.oidc.app.database.client.query("SELECT count(*)::int8 FROM sessions WHERE revoked_at IS NULL")
        for try await count in rows.decode(Int.self) { return count }
        return -1
    }

    @Test func theAuthorizationEndpointRedirectsOnlyToARegisteredURI() async throws {
        try await Self.run { setup in
            let client = setup.web.client.clientID
            // Unknown client, unregistered redirect URI, another tenant's client: a page, no redirect.
            for (fields, tenant) in [
                (Self.request(client: "ibc_AAAAAAAAAAAAAAAAAAAAAA"), "acme"),
                (Self.request(client: client, redirectURI: Self.redirectURI + "x"), "acme"),
                (Self.request(client: client), "bravo"),
            ] {
                let page = try await setup.browser.visit(Self.authorizeURL(fields, tenant: tenant))
                #expect(page.status == 400, "\(page.body.prefix(200))")
                #expect(page.location == nil)
            }
            let unknownTenant = try await setup.browser.visit(Self.authorizeURL(Self.request(client: client), tenant: "nobody"))
            #expect(unknownTenant.status == 404 && unknownTenant.location == nil)
            // Errors the client can be told: at its redirect URI, with state and iss.
            let cases: [([(String, String)], String)] = [
                (Self.request(client: client).filter { $0.0 != "scope" } + [("scope", "email")], "invalid_scope"),
                (Self.request(client: client) + [("prompt", "none")], "login_required"),
                (
                    Self.request(client: client, pkce: nil) + [
                        ("code_challenge", PKCEPair().verifier), ("code_challenge_method", "plain"),
                    ],
                    "invalid_request"
                ),
                (Self.request(client: client).map { $0.0 == "response_type" ? ($0.0, "token") : $0 }, "unsupported_response_type"),
                (Self.request(client: client, provider: "yahoo"), "invalid_request"),
                (Self.request(client: client) + [("nonce", "second")], "invalid_request"),
            ]
            for (fields, error) in cases {
                let page = try await setup.browser.visit(Self.authorizeURL(fields))
                #expect(page.status == 303, "\(error): \(page.body.prefix(200))")
                let location = try #require(page.location)
                #expect(location.hasPrefix(Self.redirectURI + "?"))
                let query = WebBrowser.query(location)
                #expect(query["error"] == error, "\(query)")
                #expect(query["state"] == "st-1" && query["iss"] == setup.issuer)
                #expect(query["code"] == nil)
            }
            #expect(try await Self.openSessions(setup) == 0)
        }
    }

    // MARK: Logout

    @Test func logoutEndsTheHintsSessionAndGoesBackOnlyToARegisteredURI() async throws {
        try await Self.run { setup in
            let issued = try await ClientAdmin(database: setup.oidc.app.database, actor: "test").create(
                tenant: "acme", name: "spa", redirectURIs: [Self.redirectURI], postLogoutRedirectURIs: ["https://app.example.com/bye"],
                isPublic: true, allowLoopback: false)
            let client = issued.client.clientID
            let pkce = PKCEPair()
            let code = try #require(try await Self.code(setup, Self.request(client: client, pkce: pkce))["code"])
            let (status, body) = try await Self.token(
                setup,
                [
                    ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", Self.redirectURI),
                    ("code_verifier", pkce.verifier), ("client_id", client),
                ])
            #expect(status == 200, "\(body)")
            let idToken = try #require(body["id_token"] as? String)
            let refresh = try #require(body["refresh_token"] as? String)
            let sid = try #require(try Self.claims(of: idToken)["sid"] as? String)
            func logout(_ fields: [(String, String)], tenant: String = "acme") async throws -> WebBrowser.Page {
                try await setup.browser.visit("/t/\(tenant)/logout?" + FormEncoding.encode(fields))
            }
            // Refused, each a page and never a redirect, and the session still open.
            let tampered = String(idToken.dropLast(2)) + (idToken.hasSuffix("AA") ? "BB" : "AA")
            let refusals: [([(String, String)], String)] = [
                ([("id_token_hint", idToken), ("post_logout_redirect_uri", "https://app.example.com/bye/")], "acme"),
                ([("id_token_hint", tampered), ("post_logout_redirect_uri", "https://app.example.com/bye")], "acme"),
                ([("id_token_hint", idToken), ("client_id", setup.web.client.clientID)], "acme"),
                ([("post_logout_redirect_uri", "https://app.example.com/bye")], "acme"),
                ([("id_token_hint", idToken)], "bravo"),
            ]
            for (fields, tenant) in refusals {
                let page = try await logout(fields, tenant: tenant)
                #expect(page.status == 400 && page.location == nil, "\(fields.map(\.0)) at \(tenant): \(page.status)")
            }
            #expect(try await !Self.sessionRevoked(setup, sid))
            // Honoured: the session ends and the person goes back with the state.
            let done = try await logout([
                ("id_token_hint", idToken), ("post_logout_redirect_uri", "https://app.example.com/bye"), ("state", "z"),
            ])
            #expect(done.status == 303)
            #expect(done.location == "https://app.example.com/bye?state=z")
            #expect(try await Self.sessionRevoked(setup, sid))
            let (after, refused) = try await Self.token(
                setup, [("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", client)])
            #expect(after == 400 && refused["error"] as? String == "invalid_grant")
            // Without anything: a signed-out page.
            let plain = try await logout([])
            #expect(plain.status == 200 && plain.body.contains("signed out"))
        }
    }

    // MARK: The page

    @Test func theSignInPageListsTheTenantsWebOptionsInTheirLanguageAndRunsNoScript() async throws {
        try await Self.run { setup in
            _ = try await setup.oidc.app.database.client.query("UPDATE tenants SET display_name = '<script>alert(1)</script> & Co'")
            let url = Self.authorizeURL(Self.request(client: setup.web.client.clientID, provider: nil))
            let english = try await setup.client.execute(uri: url, method: .get, headers: [.acceptLanguage: "en-GB,en;q=0.9"])
            #expect(english.status == .ok)
            let html = String(buffer: english.body)
            #expect(html.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; Co"))
            #expect(!html.contains("<script"))
            #expect(html.contains("Sign in with LINE"))
            #expect(html.contains("provider=line"))
            #expect(english.body.readableBytes <= 10_240, "the page is at most 10 KB")
            let policy = try #require(english.headers[.contentSecurityPolicy])
            #expect(policy.contains("default-src 'none'") && policy.contains("frame-ancestors 'none'"))
            #expect(!policy.contains("unsafe"))
            let japanese = try await setup.client.execute(uri: url, method: .get, headers: [.acceptLanguage: "ja-JP,ja;q=0.9,en;q=0.8"])
            #expect(String(buffer: japanese.body).contains("LINEでログイン"))
            #expect(String(buffer: japanese.body).contains("lang=\"ja\""))
            // The page's link starts LINE's sign-in.
            let href = try #require(
                html.range(of: "href=\"/t/acme/authorize?").map { html[$0.lowerBound...].dropFirst(6).prefix { $0 != "\"" } })
            let started = try await setup.browser.visit(WebBrowser.unescape(String(href)))
            #expect(started.status == 303)
            #expect(started.location?.hasPrefix(setup.oidc.lineIssuer) == true)
            let css = try await setup.client.execute(uri: "/assets/sign-in.css", method: .get)
            #expect(css.status == .ok && css.headers[.contentType]?.hasPrefix("text/css") == true)
        }
    }
}

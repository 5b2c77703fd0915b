import BrokerApplication
import BrokerCore
@testable import BrokerServer
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

/// Sign in with Apple on the web (issue 22 §1, §2): a Services ID, Apple's authorize page (the
/// mock's, which posts itself), `POST /apple/callback`, the broker code on the return URL and
/// its exchange, through a real HTTP client following redirects.
@Suite(.timeLimit(.minutes(10))) struct AppleWebSignInTests {
    static let returnURL = "https://acme.example.com/done"

    static func browser(_ setup: AppleTestSetup) -> WebBrowser {
        WebBrowser(broker: setup.client, brokerOrigins: ["https://acme.example.com", TestApp.publicURL])
    }

    /// Starts a web sign-in and returns the authorize URL.
    static func start(_ setup: AppleTestSetup, state: String = "s1", intent: String? = nil, key: String? = nil) async throws -> String {
        var body: [String: Any] = ["client_id": "com.acme.web", "return_url": returnURL, "state": state]
        body["intent"] = intent
        let response = try await setup.post("/v1/sign-in/apple/web/start", json: body, key: key)
        #expect(response.status == .ok, "\(String(buffer: response.body))")
        let json = try response.json()
        return try #require(json["authorize_url"] as? String)
    }

    /// Runs the browser from start to the return URL; returns the return URL's parameters.
    static func signInOnTheWeb(_ setup: AppleTestSetup, state: String = "s1", intent: String? = nil) async throws -> [String: String] {
        let authorize = try await start(setup, state: state, intent: intent)
        let back = try await browser(setup).follow(authorize, until: returnURL)
        #expect(!back.contains("eyJ"), "no token on the return URL")
        #expect(!back.contains("%40") && !back.contains("@"), "no email on the return URL")
        return WebBrowser.query(back)
    }

    static func exchange(_ setup: AppleTestSetup, code: String, provider: String = "apple", key: String? = nil) async throws -> TestResponse
    {
        try await setup.post("/v1/sign-in/\(provider)/web/exchange", json: ["code": code], key: key)
    }

    static func accountCount(_ setup: AppleTestSetup) async throws -> Int {
        let rows = try await setup.app.database.client.query("SELECT count(*)::int8 FROM accounts WHERE tenant_id = \(setup.tenant.id)")
        var count = 0
        for try await value in rows.decode(Int.self) { count = value }
        return count
    }

    @Test func theWholeFlowSignsInOnceAndKeepsApplesRefreshToken() async throws {
        try await AppleTestSetup.run { setup in
            let authorize = try await Self.start(setup)
            #expect(authorize.hasPrefix("http://127.0.0.1:") && authorize.contains("/auth/authorize?"))
            let query = WebBrowser.query(authorize)
            #expect(query["client_id"] == "com.acme.web")
            #expect(query["redirect_uri"] == "https://acme.example.com/apple/callback")
            #expect(query["response_type"] == "code id_token")
            #expect(query["response_mode"] == "form_post")
            #expect(query["scope"] == "name email")
            #expect(query["state"] != "s1" && (query["state"]?.count ?? 0) >= 43, "the broker's own state, not the caller's")
            #expect((query["nonce"]?.count ?? 0) >= 43)

            let back = try await Self.browser(setup).follow(authorize, until: Self.returnURL)
            let returned = WebBrowser.query(back)
            #expect(returned["state"] == "s1")
            #expect(returned["error"] == nil)
            let code = try #require(returned["code"])
            #expect(!back.contains("eyJ") && !back.contains("@"))

            let response = try await Self.exchange(setup, code: code)
            #expect(response.status == .ok, "\(String(buffer: response.body))")
            #expect(response.headers[.cacheControl] == "no-store")
            let body = try response.json()
            #expect(body[path: "is_new_account"] as? Bool == true)
            #expect(body[path: "identity.provider"] as? String == "apple")
            #expect(body[path: "account.email"] as? String == "web.user@example.com")
            #expect(body[path: "account.name.given_name"] as? String == "Web")
            #expect(body[path: "account.name.family_name"] as? String == "User")
            #expect((body[path: "session.access_token"] as? String)?.isEmpty == false)

            // Apple's refresh token is kept, sealed.
            let rows = try await setup.app.database.client.query(
                "SELECT count(*)::int8 FROM identities WHERE tenant_id = \(setup.tenant.id) AND provider_refresh_token_sealed IS NOT NULL")
            var kept = 0
            for try await value in rows.decode(Int.self) { kept = value }
            #expect(kept == 1)

            // The code is single use.
            let again = try await Self.exchange(setup, code: code)
            #expect(again.status == .badRequest)
            #expect(try again.json()["code"] as? String == "invalid_grant")
        }
    }

    @Test func oneAccountAcrossTheAppAndTheWebAndNoSideBlanksTheOther() async throws {
        try await AppleTestSetup.run { setup in
            let subject = "000777.shared0person000000000000000.0001"
            setup.apple.webUser = MockAppleIdP.WebUser(
                subject: subject, email: "shared@example.com", givenName: "Ada", familyName: "Lovelace")
            // Natively first, through the App ID, without a name.
            let native = try await setup.signIn([
                "client_id": "com.acme.app", "identity_token": try setup.token(subject: subject, email: "shared@example.com"),
            ])
            let accountID = try #require(native[path: "account.id"] as? String)
            #expect(native[path: "account.name"] is NSNull)

            // Then on the web, through the Services ID of the same team: the same account, and
            // the name Apple gave on the web's first authorization.
            let returned = try await Self.signInOnTheWeb(setup)
            let web = try await Self.exchange(setup, code: try #require(returned["code"])).json()
            #expect(web[path: "account.id"] as? String == accountID)
            #expect(web[path: "is_new_account"] as? Bool == false)
            #expect(web[path: "account.name.given_name"] as? String == "Ada")

            // Natively again without a name: the web's name stays.
            let later = try await setup.signIn([
                "client_id": "com.acme.app", "identity_token": try setup.token(subject: subject, email: "shared@example.com"),
            ])
            #expect(later[path: "account.id"] as? String == accountID)
            #expect(later[path: "account.name.given_name"] as? String == "Ada")

            // And on the web again (Apple sends no `user` the second time): still there.
            let second = try await Self.signInOnTheWeb(setup)
            let again = try await Self.exchange(setup, code: try #require(second["code"])).json()
            #expect(again[path: "account.id"] as? String == accountID)
            #expect(again[path: "account.name.family_name"] as? String == "Lovelace")
            #expect(again[path: "account.email"] as? String == "shared@example.com")
        }
    }

    @Test func aStateIsSpentOnceAndAnUnknownOneCreatesNothing() async throws {
        try await AppleTestSetup.run { setup in
            let authorize = try await Self.start(setup)
            let page = try await WebBrowser.get(authorize)
            let form = try #require(WebBrowser.form(in: page.body))
            let browser = Self.browser(setup)
            let first = try await browser.submit(action: form.action, fields: form.fields)
            #expect(first.status == 303)
            let code = try #require(first.location.flatMap { WebBrowser.query($0)["code"] })
            // Posted again after the first answered (issue 39 F16): the same code, nothing redeemed again.
            let repeated = try await browser.submit(action: form.action, fields: form.fields)
            #expect(repeated.status == 303)
            #expect(repeated.location.flatMap { WebBrowser.query($0)["code"] } == code)
            #expect(setup.apple.codeExchanges == 1)
            #expect(try await Self.exchange(setup, code: code).status == .ok)
            // Once the code is exchanged, the form is a replay.
            let replayed = try await browser.submit(action: form.action, fields: form.fields)
            #expect(replayed.status == 400)
            #expect(replayed.location == nil)
            #expect(!replayed.body.contains("eyJ") && !replayed.body.contains("@") && !replayed.body.contains("Error"))

            let unknown = try await browser.submit(
                action: form.action, fields: [("state", "not-a-state"), ("code", "c"), ("id_token", "x.y.z")])
            #expect(unknown.status == 400)
            let missing = try await browser.submit(action: form.action, fields: [("code", "c")])
            #expect(missing.status == 400)
            #expect(try await Self.accountCount(setup) == 1)
        }
    }

    /// Issue 39 F16: the same form posted again while the first post is redeeming Apple's code
    /// landed the person on `error=provider_refused` and audited a misconfiguration. The repeat
    /// waits for the first and is answered with the same code; Apple is called once.
    @Test func aFormPostedAgainWhileTheFirstIsInFlightGetsTheSameCode() async throws {
        try await AppleTestSetup.run { setup in
            let authorize = try await Self.start(setup)
            let page = try await WebBrowser.get(authorize)
            let form = try #require(WebBrowser.form(in: page.body))
            setup.apple.hold(.codeGrant)
            async let first = Self.browser(setup).submit(action: form.action, fields: form.fields)
            await setup.apple.waitForArrivals(.codeGrant, count: 1)
            async let second = Self.browser(setup).submit(action: form.action, fields: form.fields)
            #expect(try await eventually(timeout: .seconds(20)) { setup.app.services.webCallbackRepeats.waited == 1 })
            setup.apple.release(.codeGrant)
            let (one, two) = try await (first, second)
            #expect(one.status == 303 && two.status == 303, "\(one) \(two)")
            let code = try #require(one.location.flatMap { WebBrowser.query($0)["code"] })
            #expect(two.location == one.location, "the same code, and the caller's state")
            #expect(two.location.flatMap { WebBrowser.query($0)["state"] } == "s1")
            #expect(setup.apple.arrivals(.codeGrant) == 1, "Apple's code is redeemed once")
            await setup.app.services.securityEvents.settled()
            let rows = try await setup.app.database.client.query(
                "SELECT count(*)::int8 FROM audit_log WHERE tenant_id = \(setup.tenant.id) AND action = 'web_sign_in.code_refused'")
            for try await count in rows.decode(Int.self) { #expect(count == 0, "nothing for the operator to fix") }
            #expect(try await Self.exchange(setup, code: code).status == .ok)
            #expect(try await Self.accountCount(setup) == 1)
        }
    }

    /// A repeat of a callback that failed is sent back with the same error, without calling
    /// Apple again; one whose first is still in flight when its own deadline nears is sent back
    /// as a temporary failure, and one whose first stopped (its claim lapsed) finishes the sign-in.
    @Test func aRepeatOfAFailedOrStuckCallbackIsAnsweredWithoutRedeemingTwice() async throws {
        try await AppleTestSetup.run { setup in
            setup.apple.tokenFault = .answer(status: 503, body: Data())
            let authorize = try await Self.start(setup)
            let form = try #require(WebBrowser.form(in: try await WebBrowser.get(authorize).body))
            let first = try await Self.browser(setup).submit(action: form.action, fields: form.fields)
            #expect(first.location.flatMap { WebBrowser.query($0)["error"] } == "provider_unavailable")
            let exchanges = setup.apple.codeExchanges
            let repeated = try await Self.browser(setup).submit(action: form.action, fields: form.fields)
            #expect(repeated.location == first.location)
            #expect(setup.apple.codeExchanges == exchanges)

            // A callback in flight elsewhere (its claim held in the database) and a repeat with
            // a second left of its request: back with a temporary failure.
            setup.apple.tokenFault = .none
            let stuck = try await Self.start(setup, state: "s2")
            let stuckForm = try #require(WebBrowser.form(in: try await WebBrowser.get(stuck).body))
            let state = try #require(stuckForm.fields.first { $0.0 == "state" }?.1)
            let service = setup.app.services.webSignIn
            let sealed = try #require(SealedWebSignInState.open(state, secrets: service.secrets))
            let claimed = try await setup.app.database.webSignIns.claimSealedState(
                sealed, now: Date(), claimUntil: Date().addingTimeInterval(3), subject: nil)
            #expect(claimed != nil)
            #expect(claimed?.state.tenantID == WebSignInStateToken.tenant(of: state), "the state names its tenant (decision 0092)")
            let fields = Dictionary(stuckForm.fields, uniquingKeysWith: { $1 })
            let response = AuthorizationResponse(code: fields["code"], idToken: fields["id_token"], user: fields["user"])
            let waited = await RequestBudget.$deadline.withValue(.now + .seconds(1)) {
                await service.callback(
                    route: .apple, state: state, providerError: nil, response: response, context: .detached(setup.app.database.logger))
            }
            guard case .redirect(let back) = waited else { Issue.record("\(waited)"); return }
            #expect(WebBrowser.query(back)["error"] == "temporarily_unavailable")
            #expect(WebBrowser.query(back)["state"] == "s2")
            // The claim lapses (its process stopped): the next repeat finishes the sign-in.
            let later = await service.callback(
                route: .apple, state: state, providerError: nil, response: response, context: .detached(setup.app.database.logger),
                now: Date().addingTimeInterval(5))
            guard case .redirect(let done) = later else { Issue.record("\(later)"); return }
            #expect(WebBrowser.query(done)["code"] != nil)
        }
    }

    @Test func anExpiredStateIsRefused() async throws {
        try await AppleTestSetup.run { setup in
            // Started eleven minutes ago (the injected clock of the service).
            let started = try await setup.app.services.webSignIn.start(
                tenant: setup.tenant, provider: .apple, clientID: "com.acme.web", returnURL: Self.returnURL, callerState: "old",
                intent: .auto, context: .detached(setup.app.database.logger), now: Date().addingTimeInterval(-660))
            let page = try await WebBrowser.get(started.authorizeURL)
            let form = try #require(WebBrowser.form(in: page.body))
            let answer = try await Self.browser(setup).submit(action: form.action, fields: form.fields)
            #expect(answer.status == 400)
            #expect(try await Self.accountCount(setup) == 0)
        }
    }

    /// Decision 0099: the broker's state carries the sign-in sealed. Apple's form posted back with
    /// that state changed (a character of its sealed part, its tenant part, cut short) is the
    /// plain page; Apple's code is not redeemed, no state is written and nobody is signed in. The
    /// unchanged state then signs the person in.
    @Test func aStateChangedInTransitIsRefusedAndWritesNothing() async throws {
        try await AppleTestSetup.run { setup in
            let bravo = try await setup.app.createTenant("bravo")
            let authorize = try await Self.start(setup)
            let form = try #require(WebBrowser.form(in: try await WebBrowser.get(authorize).body))
            let state = try #require(form.fields.first { $0.0 == "state" }?.1)
            var flipped = Array(state)
            flipped[state.count / 2] = flipped[state.count / 2] == "A" ? "B" : "A"
            let otherTenant = String(WebSignInStateToken.make(tenantID: bravo.id).prefix(22)) + String(state.dropFirst(22))
            let exchanges = setup.apple.codeExchanges
            for changed in [String(flipped), otherTenant, String(state.dropLast(3))] {
                let fields = form.fields.map { $0.0 == "state" ? ($0.0, changed) : $0 }
                let answer = try await Self.browser(setup).submit(action: form.action, fields: fields)
                #expect(answer.status == 400)
            }
            #expect(setup.apple.codeExchanges == exchanges, "Apple's code was not redeemed")
            let rows = try await setup.app.database.client.query("SELECT count(*)::int8 FROM web_sign_in_states")
            for try await count in rows.decode(Int.self) { #expect(count == 0, "nothing written") }
            #expect(try await Self.accountCount(setup) == 0)
            let answer = try await Self.browser(setup).submit(action: form.action, fields: form.fields)
            #expect(answer.location.map { WebBrowser.query($0)["code"] != nil } == true)
        }
    }

    @Test func aBrokerCodeIsBoundToItsTenantAndProviderAndLivesAMinute() async throws {
        try await AppleTestSetup.run { setup in
            _ = try await setup.app.createTenant("bravo")
            let bravoKey = try await setup.app.createKey("bravo")
            let code = try #require(try await Self.signInOnTheWeb(setup)["code"])
            // Another tenant's key, another provider's route: refused, and the code is not spent.
            let otherTenant = try await Self.exchange(setup, code: code, key: bravoKey)
            #expect(otherTenant.status == .badRequest)
            #expect(try otherTenant.json()["code"] as? String == "invalid_grant")
            let otherProvider = try await Self.exchange(setup, code: code, provider: "google")
            #expect(try otherProvider.json()["code"] as? String == "invalid_grant")
            #expect(try await Self.exchange(setup, code: code).status == .ok)

            // A code past its minute.
            let late = try #require(try await Self.signInOnTheWeb(setup, state: "late")["code"])
            await #expect(throws: WebSignInFailure.invalidGrant) {
                try await setup.app.services.webSignIn.exchange(
                    tenant: setup.tenant, provider: .apple, code: late, context: .detached(setup.app.database.logger),
                    now: Date().addingTimeInterval(61))
            }
            #expect(try await Self.exchange(setup, code: late).status == .badRequest, "an expired code is spent")
            #expect(try await Self.exchange(setup, code: "nonsense").status == .badRequest)
        }
    }

    @Test func cancellingAtAppleSendsThePersonBackWithTheError() async throws {
        try await AppleTestSetup.run { setup in
            setup.apple.authorizeFault = .cancel
            let returned = try await Self.signInOnTheWeb(setup)
            #expect(returned["error"] == "user_cancelled_authorize")
            #expect(returned["state"] == "s1")
            #expect(returned["code"] == nil)
            #expect(try await Self.accountCount(setup) == 0)
        }
    }

    @Test func aWrongNonceOrCodeHashIsAnInvalidTokenAndNoCodeIsRedeemed() async throws {
        try await AppleTestSetup.run { setup in
            for fault in [MockAppleIdP.AuthorizeFault.wrongNonce, .wrongCodeHash] {
                setup.apple.authorizeFault = fault
                let returned = try await Self.signInOnTheWeb(setup)
                #expect(returned["error"] == "invalid_token", "\(fault)")
                #expect(returned["code"] == nil)
            }
            #expect(setup.apple.codeExchanges == 0, "nothing is redeemed at Apple for a token that does not verify")
            #expect(try await Self.accountCount(setup) == 0)
        }
    }

    @Test func applesExchangedTokenNamingAnotherPersonFailsAndItsTokenIsGivenBack() async throws {
        try await AppleTestSetup.run { setup in
            setup.apple.tokenFault = .otherSubject
            let returned = try await Self.signInOnTheWeb(setup)
            #expect(returned["error"] == "invalid_token")
            #expect(try await Self.accountCount(setup) == 0)
            #expect(try await eventually { !setup.apple.revokedTokens.isEmpty }, "the refresh token of the other person is revoked")
        }
    }

    @Test func appleDownAtTheExchangeIsProviderUnavailable() async throws {
        try await AppleTestSetup.run { setup in
            setup.apple.tokenFault = .answer(status: 503, body: Data())
            let returned = try await Self.signInOnTheWeb(setup)
            #expect(returned["error"] == "provider_unavailable")
            #expect(try await Self.accountCount(setup) == 0)
        }
    }

    @Test func applesInvalidClientIsLoggedAndAuditedNeverShown() async throws {
        try await AppleTestSetup.run { setup in
            setup.apple.tokenFault = .answer(status: 400, body: Data(#"{"error":"invalid_client"}"#.utf8))
            let authorize = try await Self.start(setup)
            let back = try await Self.browser(setup).follow(authorize, until: Self.returnURL)
            #expect(WebBrowser.query(back)["error"] == "provider_refused")
            #expect(!back.contains("invalid_client"))
            await setup.app.services.securityEvents.settled()
            let rows = try await setup.app.database.client.query(
                "SELECT details::text FROM audit_log WHERE tenant_id = \(setup.tenant.id) AND action = 'web_sign_in.code_refused'")
            var details: [String] = []
            for try await text in rows.decode(String.self) { details.append(text) }
            #expect(details.count == 1)
            #expect(details.first?.contains("invalid_client") == true)
            #expect(details.first?.contains("key id") == true, "says what the operator must fix")
            #expect(try await Self.accountCount(setup) == 0)
        }
    }

    @Test func intentSignInForAnUnknownPersonRedeemsNothing() async throws {
        try await AppleTestSetup.run { setup in
            let returned = try await Self.signInOnTheWeb(setup, intent: "sign_in")
            #expect(returned["error"] == "account_not_found")
            #expect(setup.apple.codeExchanges == 0)
            #expect(try await Self.accountCount(setup) == 0)
        }
    }

    @Test func afterAppleRevokedConsentAWebSignInWithIntentSignInRelinksTheSameAccount() async throws {
        try await AppleTestSetup.run { setup in
            let first = try await Self.signInOnTheWeb(setup)
            let firstCode = try #require(first["code"])
            let account = try #require(try await Self.exchange(setup, code: firstCode).json()[path: "account.id"] as? String)
            let subject = setup.apple.webUser.subject
            #expect(try await AppleNotifications.notify(setup, "consent-revoked", subject: subject).status == .ok)
            #expect(try await AppleNotifications.account(setup, account)[path: "account.status"] as? String == "disabled")

            // A new consent through the web, asking to sign in only: the same account, enabled.
            let returned = try await Self.signInOnTheWeb(setup, state: "s2", intent: "sign_in")
            #expect(returned["error"] == nil, "\(returned)")
            let code = try #require(returned["code"])
            let again = try await Self.exchange(setup, code: code)
            #expect(again.status == .ok)
            #expect(try again.json()[path: "account.id"] as? String == account)
            #expect(try await AppleNotifications.account(setup, account)[path: "account.status"] as? String == "active")
        }
    }

    @Test func aDisabledAccountIsRefusedBeforeApplesCodeIsRedeemed() async throws {
        try await AppleTestSetup.run { setup in
            let first = try await Self.signInOnTheWeb(setup)
            #expect(try await Self.exchange(setup, code: try #require(first["code"])).status == .ok)
            let redeemed = setup.apple.codeExchanges
            _ = try await setup.app.database.client.query("UPDATE accounts SET status = 'disabled' WHERE tenant_id = \(setup.tenant.id)")
            // The account's status is read with the state, for the posted token's subject.
            let returned = try await Self.signInOnTheWeb(setup, state: "s2")
            #expect(returned["error"] == "account_disabled")
            #expect(returned["state"] == "s2")
            #expect(setup.apple.codeExchanges == redeemed, "nothing is redeemed at Apple")
        }
    }

    @Test func aFormWritesASpaceAsAPlus() async throws {
        let form = WebSignInRoute.formFields(ByteBuffer(string: "user=%7B%22name%22%3A+%22A%2BB%22%7D&state=s+1&state=other&code=c%2B1"))
        #expect(form["user"] == #"{"name": "A+B"}"#)
        #expect(form["state"] == "s 1", "the first of a repeated name")
        #expect(form["code"] == "c+1")
        #expect(form["id_token"] == nil)
        let schemeLike = WebSignInRoute.formFields(ByteBuffer(string: "state=a://b&code=c"))
        #expect(schemeLike["state"] == "a://b" && schemeLike["code"] == "c", "nothing in a body is read as a URL's scheme")
    }

    @Test func startRefusesWhatIsNotRegistered() async throws {
        try await AppleTestSetup.run { setup in
            let unknownClient = try await setup.post(
                "/v1/sign-in/apple/web/start", json: ["client_id": "com.acme.app", "return_url": Self.returnURL])
            #expect(unknownClient.status == .badRequest)
            #expect(try unknownClient.json()["code"] as? String == "unknown_client")
            let notRegistered = try await setup.post(
                "/v1/sign-in/apple/web/start", json: ["client_id": "com.acme.web", "return_url": "https://evil.example.net/done"])
            #expect(try notRegistered.json()["code"] as? String == "return_url_not_registered")
            let noWeb = try await setup.post("/v1/sign-in/facebook/web/start", json: ["return_url": Self.returnURL])
            #expect(try noWeb.json()["code"] as? String == "web_flow_not_supported")
            let malformed = try await setup.post("/v1/sign-in/apple/web/start", json: ["client_id": "com.acme.web"])
            #expect(try malformed.json()["code"] as? String == "invalid_request")
            // The only Services ID is the default.
            let implicit = try await setup.post("/v1/sign-in/apple/web/start", json: ["return_url": Self.returnURL])
            #expect(implicit.status == .ok)
            let rows = try await setup.app.database.client.query("SELECT count(*)::int8 FROM web_sign_in_states")
            var states = 0
            for try await value in rows.decode(Int.self) { states = value }
            #expect(states == 0, "a start writes nothing: the sign-in is sealed in its state (decision 0099)")
        }
    }

    @Test func loginOptionsNameTheStartEndpoint() async throws {
        try await AppleTestSetup.run { setup in
            let response = try await setup.client.execute(
                uri: "/v1/login-options?platform=web", method: .get, headers: [.authorization: "Bearer \(setup.apiKey)"], body: nil)
            let options = try #require(try response.json()["options"] as? [[String: Any]])
            let apple = try #require(options.first { $0["provider"] as? String == "apple" })
            #expect(apple["start_endpoint"] as? String == "/v1/sign-in/apple/web/start")
            let ios = try await setup.client.execute(
                uri: "/v1/login-options?platform=ios", method: .get, headers: [.authorization: "Bearer \(setup.apiKey)"], body: nil)
            let iosApple = try #require((try ios.json()["options"] as? [[String: Any]])?.first { $0["provider"] as? String == "apple" })
            #expect(iosApple["start_endpoint"] is NSNull)
        }
    }

    @Test func aDatabaseOutageAnswersInBoundedTimeAndSpendsNothing() async throws {
        try await AppleTestSetup.run { setup in
            let authorize = try await Self.start(setup)
            let page = try await WebBrowser.get(authorize)
            let form = try #require(WebBrowser.form(in: page.body))
            let code = try #require(try await Self.signInOnTheWeb(setup, state: "before")["code"])
            let name = TestDatabase.name(of: setup.app.databaseURL)

            // The broker's database goes away: no new connection, the open ones killed.
            try await TestDatabase.adminQuery("ALTER DATABASE \(name) ALLOW_CONNECTIONS false")
            try await TestDatabase.adminQuery("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(name)'")
            let started = ContinuousClock.now
            let callback = try await Self.browser(setup).submit(action: form.action, fields: form.fields)
            #expect(callback.status == 503, "\(callback.status) \(callback.body)")
            #expect(callback.location == nil)
            #expect(!callback.body.contains("eyJ") && !callback.body.contains("@"))
            let exchange = try await Self.exchange(setup, code: code)
            #expect(exchange.status == .serviceUnavailable)
            #expect(try exchange.json()["code"] as? String == "database_unavailable")
            #expect(ContinuousClock.now - started < .seconds(30), "answered within the request timeouts")

            // Back: the state and the code were not spent, and finish the sign-in.
            try await TestDatabase.adminQuery("ALTER DATABASE \(name) ALLOW_CONNECTIONS true")
            var answered: WebBrowser.Page?
            let recovered = try await eventually(timeout: .seconds(20)) {
                let retry = try await Self.browser(setup).submit(action: form.action, fields: form.fields)
                if retry.status != 503 { answered = retry }
                return retry.status != 503
            }
            #expect(recovered)
            #expect(answered?.status == 303)
            #expect(answered?.location.map { WebBrowser.query($0)["code"] != nil } == true)
            #expect(try await Self.exchange(setup, code: code).status == .ok)
        }
    }
}

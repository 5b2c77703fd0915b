import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import MockIdP
import NIOCore
import Providers
import TestSupport
import Testing

/// Google's web flow (issue 22 §3, type `google`): the authorization code flow with PKCE whose
/// endpoints come from Google's discovery document (`BROKER_GOOGLE_DISCOVERY_URL`), Google's own
/// token policy on the token endpoint's id token, and one account with the native sign-in.
@Suite(.timeLimit(.minutes(10))) struct GoogleWebSignInTests {
    static let returnURL = "https://acme.example.com/done"
    static let secret = "google-web-client-secret"

    @Test func theCodeFlowThroughGooglesDiscoverySignsInToTheNativeAccount() async throws {
        try await ProviderTestSetup.run { setup in
            setup.google.registerWebClient(ProviderTestSetup.webClient, secret: Self.secret)
            let registry = ProviderAdmin.registry(secrets: setup.app.secrets, endpoints: setup.app.services.endpoints)
            _ = try await ProviderAdmin(database: setup.app.database, actor: "test").enable(
                tenant: "acme", provider: "google", type: nil, platforms: [.ios, .web],
                values: [
                    "client-id": [ProviderTestSetup.webClient, ProviderTestSetup.iosClient], "client-secret": [Self.secret],
                    "return-url": [Self.returnURL],
                ], registry: registry, force: true)
            setup.google.web.user = MockOIDCIssuer.WebUser(subject: "google-person-1", email: "person@gmail.com", name: "Grace Hopper")
            // The same person signs in natively first.
            let native = try await setup.post(
                "/v1/sign-in/google", json: ["id_token": try setup.googleToken(subject: "google-person-1")], tenant: "acme")
            #expect(native.status == .ok, "\(String(buffer: native.body))")
            let accountID = try #require(try native.json()[path: "account.id"] as? String)

            let start = try await setup.post(
                "/v1/sign-in/google/web/start", json: ["return_url": Self.returnURL, "state": "g"], tenant: "acme")
            #expect(start.status == .ok, "\(String(buffer: start.body))")
            let authorize = try #require(try start.json()["authorize_url"] as? String)
            #expect(authorize.contains("/google/o/oauth2/v2/auth?"))
            #expect(WebBrowser.query(authorize)["client_id"] == ProviderTestSetup.webClient)
            let back = try await WebBrowser(broker: setup.client, brokerOrigins: [TestApp.publicURL]).follow(
                authorize, until: Self.returnURL)
            let code = try #require(WebBrowser.query(back)["code"], "\(back)")
            let exchanged = try await setup.post("/v1/sign-in/google/web/exchange", json: ["code": code], tenant: "acme")
            #expect(exchanged.status == .ok, "\(String(buffer: exchanged.body))")
            let body = try exchanged.json()
            #expect(body[path: "account.id"] as? String == accountID)
            #expect(body[path: "identity.provider"] as? String == "google")
            #expect(body[path: "is_new_account"] as? Bool == false)
        }
    }
}

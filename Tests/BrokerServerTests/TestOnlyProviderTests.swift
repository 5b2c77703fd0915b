import BrokerCore
import BrokerApplication
import BrokerServer
import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import MockIdP
import NIOCore
import Providers
import Storage
import Testing
import TestOnlyProviderType
import TestSupport

/// A provider type the broker does not ship (``TestOnlyProvider``, one folder, one descriptor)
/// registered with one line, `additionalProviderTypes:` / `ProviderAdmin.registry(additional:)`
/// (``OIDCTestSetup/run(additional:enableLine:lineValues:_:)`` passes it to both), and run
/// through everything a built-in type goes through: sign-in (new, returning, replay), linking,
/// login options, and the admin layer of `broker provider enable|list|show|disable`.
///
/// Here the admin layer, `ProviderAdmin`, is driven in process; `brokerTests`'
/// `ProviderTypeCLITests` drives the same type through the real command line.
// A guard against a hang, not a bound on speed: every suite runs at once, so a test here takes
// about as long as the whole run (150-160 s on two cores), whatever it takes alone (1-20 s).
@Suite(.timeLimit(.minutes(10))) struct TestOnlyProviderTests {
    typealias S = OIDCTestSetup

    static let client = "test-only-client"

    /// The setup with the test-only type registered, and tenant acme's provider `tester` of
    /// that type enabled on web (display name Tester).
    static func run(_ test: @Sendable @escaping (S, MockOIDCIssuer) async throws -> Void) async throws {
        let signer = try MockOIDCIssuer(name: "test-only", algorithms: [.es256])
        try await S.run(additional: [TestOnlyProvider.descriptor(signer: signer)]) { setup in
            _ = try await setup.admin.enable(
                tenant: "acme", provider: "tester", type: "test-only", platforms: [.web],
                values: ["client-id": [client], "display-name": ["Tester"]], registry: setup.registry)
            try await test(setup, signer)
        }
    }

    static func token(_ signer: MockOIDCIssuer, subject: String, audience: String = client, nonce: String? = nil) throws -> String {
        try signer.mintIDToken(
            base: "http://unused", subject: subject, audience: audience, nonce: nonce, email: "tester@example.com",
            issuer: TestOnlyProvider.issuer, extraClaims: ["jti": .string(UUID().uuidString)])
    }

    @Test func adminEnablesListsShowsAndDisablesTheType() async throws {
        try await Self.run { setup, _ in
            let tester = try #require(ProviderID(rawValue: "tester"))
            let shown = try await setup.admin.show(tenant: "acme", provider: tester, registry: setup.registry)
            #expect(shown.type == "test-only")
            #expect(shown.enabled)
            #expect(shown.displayName == "Tester")
            #expect(shown.clientIDs == [Self.client])
            #expect(shown.platforms == ["web"])
            #expect(shown.settings["issuer"] == .string(TestOnlyProvider.issuer))
            #expect(shown.abilities == ["id_tokens"])
            let listed = try await setup.admin.list(tenant: "acme", registry: setup.registry)
            #expect(listed.map(\.provider) == ["apple", "google", "facebook", "line", "tester"])
            #expect(listed.last?.type == "test-only")

            // The descriptor checks its own settings.
            let unknownFlag = await brokerErrorCode {
                _ = try await setup.admin.enable(
                    tenant: "acme", provider: "tester", type: "test-only", platforms: [.web],
                    values: ["client-id": [Self.client], "issuer": ["https://elsewhere.example"]], registry: setup.registry)
            }
            #expect(unknownFlag == "invalid_argument")
            let noClient = await brokerErrorCode {
                _ = try await setup.admin.enable(
                    tenant: "acme", provider: "tester", type: "test-only", platforms: [.web], values: [:], registry: setup.registry)
            }
            #expect(noClient == "invalid_argument")
            // A registry without the type (the `broker` binary's) does not know it.
            let builtIn = ProviderAdmin.registry(secrets: setup.app.secrets)
            let unknownType = await brokerErrorCode {
                _ = try await setup.admin.enable(
                    tenant: "bravo", provider: "tester", type: "test-only", platforms: [.web], values: ["client-id": [Self.client]],
                    registry: builtIn)
            }
            #expect(unknownType == "invalid_argument")
            #expect(try await setup.stored("tester", tenant: "bravo") == nil)
            // An id keeps its type.
            let retyped = await brokerErrorCode {
                _ = try await setup.admin.enable(
                    tenant: "acme", provider: "tester", type: "oidc", platforms: [.web],
                    values: ["client-id": [Self.client], "issuer": [setup.yahooIssuer]], registry: setup.registry)
            }
            #expect(retyped == "provider_type_conflict")

            try await setup.admin.disable(tenant: "acme", provider: tester)
            let disabled = try await setup.admin.show(tenant: "acme", provider: tester, registry: setup.registry)
            #expect(disabled.enabled == false)
            #expect(disabled.settings["issuer"] == .string(TestOnlyProvider.issuer))
            let again = try await setup.admin.enable(
                tenant: "acme", provider: "tester", platforms: [.web], values: ["client-id": [Self.client]], registry: setup.registry)
            #expect(again.enabled && again.type == "test-only", "the type the id already has")
        }
    }

    @Test func signInNewReturningAndReplayRefused() async throws {
        try await Self.run { setup, signer in
            let token = try Self.token(signer, subject: "t-1")
            let first = try await setup.signIn("tester", ["test_token": token])
            #expect(first["is_new_account"] as? Bool == true)
            #expect(first[path: "identity.provider"] as? String == "tester")
            #expect(first[path: "identity.provider_scope"] as? String == TestOnlyProvider.issuer)
            #expect(first[path: "identity.subject"] as? String == "t-1")
            let again = try await setup.signIn("tester", ["test_token": try Self.token(signer, subject: "t-1"), "client_id": Self.client])
            #expect(again["is_new_account"] as? Bool == false)
            #expect(again[path: "account.id"] as? String == first[path: "account.id"] as? String)
            let replay = try await setup.post("/v1/sign-in/tester", json: ["test_token": token])
            #expect(replay.status == .unauthorized)
            #expect(replay.problemCode == "token_replayed")

            // The descriptor's reader and policy are the ones that run.
            let oidcShaped = try await setup.post("/v1/sign-in/tester", json: ["id_token": try Self.token(signer, subject: "t-2")])
            #expect(oidcShaped.problemCode == "invalid_request")
            let foreign = try await setup.post(
                "/v1/sign-in/tester", json: ["test_token": try Self.token(signer, subject: "t-2", audience: "someone-else")])
            #expect(foreign.problemCode == "audience_mismatch")
            let nonce = try await setup.post(
                "/v1/sign-in/tester", json: ["test_token": try Self.token(signer, subject: "t-2", nonce: "a"), "nonce": "b"])
            #expect(nonce.problemCode == "nonce_mismatch")
            // Not configured in bravo.
            let bravo = try await setup.post(
                "/v1/sign-in/tester", json: ["test_token": try Self.token(signer, subject: "t-2")], tenant: "bravo")
            #expect(bravo.problemCode == "unknown_provider")
            #expect(try await setup.count("accounts") == 1)
        }
    }

    @Test func theTypeLinksAndIsListedInLoginOptions() async throws {
        try await Self.run { setup, signer in
            let person = try await setup.signIn("line", ["id_token": try setup.token(subject: "l-t")])
            let accountID = try #require(person[path: "account.id"] as? String)
            let accessToken = try #require(person[path: "session.access_token"] as? String)
            let link = try await setup.post(
                "/v1/accounts/\(accountID)/identities",
                json: ["provider": "tester", "test_token": try Self.token(signer, subject: "t-link")],
                accountToken: accessToken)
            #expect(link.status == .created, "\(String(buffer: link.body))")
            #expect(try link.json()[path: "identity.provider"] as? String == "tester")
            #expect(try await setup.identityProviders(of: accountID) == ["line", "tester"])
            let viaTester = try await setup.signIn("tester", ["test_token": try Self.token(signer, subject: "t-link")])
            #expect(viaTester[path: "account.id"] as? String == accountID)

            let web = try await setup.get("/v1/login-options?platform=web").json()
            let options = web["options"] as? [[String: Any]] ?? []
            #expect(options.compactMap { $0["provider"] as? String } == ["line", "tester"])
            let tester = try #require(options.first { $0["provider"] as? String == "tester" })
            #expect(tester["type"] as? String == "test-only")
            #expect(tester["display_name"] as? String == "Tester")
            #expect(tester["client_id"] as? String == Self.client)
            #expect(tester["qualifies"] as? Bool == false)

            // Disabled: its sign-ins answer provider_not_enabled, its identity stays.
            try await setup.admin.disable(tenant: "acme", provider: try #require(ProviderID(rawValue: "tester")))
            let turnedOff = try await eventually {
                try await setup.post("/v1/sign-in/tester", json: ["test_token": try Self.token(signer, subject: "t-link")]).problemCode
                    == "provider_not_enabled"
            }
            #expect(turnedOff)
            #expect(try await setup.identityProviders(of: accountID) == ["line", "tester"])
        }
    }
}

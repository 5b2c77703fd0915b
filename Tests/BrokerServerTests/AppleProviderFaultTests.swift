import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import MockIdP
import PostgresNIO
import Storage
import Testing

/// What a sign-in does when Apple misbehaves (issue 9 §5): its key endpoint down on a cold
/// start, an empty or malformed key set, and code exchanges whose refresh token cannot be
/// kept.
@Suite struct AppleProviderFaultTests {
    func signInBody(_ setup: AppleTestSetup, subject: String, code: String? = nil, intent: String? = nil) throws -> [String: Any] {
        var body: [String: Any] = ["client_id": "com.acme.app", "identity_token": try setup.token(subject: subject)]
        if let code { body["authorization_code"] = code }
        if let intent { body["intent"] = intent }
        return body
    }

    @Test func aColdStartWithAppleDownIs503UntilTheFirstGoodFetch() async throws {
        try await AppleTestSetup.run(prepare: { $0.keysFault = .unavailable }) { setup in
            // Nothing is fetched before a sign-in needs Apple's keys.
            let cold = try await readiness(setup.client)["providers"] as? [String: String]
            #expect(cold == ["apple": "unused", "google": "unused", "facebook": "unused"])
            let refused = try await setup.post("/v1/sign-in/apple", json: try signInBody(setup, subject: "cold"))
            #expect(refused.status == .serviceUnavailable)
            #expect(refused.problemCode == "provider_unavailable")
            #expect(refused.headers[.retryAfter] != nil)
            // The instance stays ready: readiness reports Apple's keys, it does not wait for them
            // (decision 0036).
            #expect(try await readiness(setup.client)[path: "providers.apple"] as? String == "unavailable")
            #expect(try await accountCount(setup) == 0)

            // Apple comes back: the broker retries every second, so the next fetch ends it. The
            // bound allows for a slow fetch while the whole test suite loads the two cores; on a
            // quiet machine it takes about a second.
            setup.apple.keysFault = .none
            let cameBack = ContinuousClock.now
            #expect(
                try await eventually(timeout: .seconds(8)) {
                    try await setup.post("/v1/sign-in/apple", json: try signInBody(setup, subject: "cold")).status == .ok
                })
            #expect(ContinuousClock.now - cameBack < .seconds(8))
            #expect(try await readiness(setup.client)[path: "providers.apple"] as? String == "usable")
        }
    }

    @Test(arguments: [MockAppleIdP.KeysFault.emptySet, .malformed])
    func anEmptyOrMalformedKeySetNeverLocksAnyoneOut(_ fault: MockAppleIdP.KeysFault) async throws {
        try await AppleTestSetup.run(prepare: { $0.keysFault = fault }) { setup in
            // Cold: nothing usable was ever fetched, so the provider is unavailable (not the token wrong).
            let cold = try await setup.post("/v1/sign-in/apple", json: try signInBody(setup, subject: "a"))
            #expect(cold.status == .serviceUnavailable)
            #expect(cold.problemCode == "provider_unavailable")

            setup.apple.keysFault = .none
            #expect(
                try await eventually(timeout: .seconds(3)) {
                    try await setup.post("/v1/sign-in/apple", json: try signInBody(setup, subject: "a")).status == .ok
                })

            // Warm: the fault comes back and anyone sends an unknown kid (a refetch, when the
            // interval allows one; JWKSCacheTests covers that the fetched fault never replaces
            // the cache). The cached keys stay and keep verifying.
            setup.apple.keysFault = fault
            let unknownKid = try setup.apple.mint(
                setup.apple.claims(subject: "a", audience: "com.acme.app"), header: ["kid": .string("never-published")])
            let unknown = try await setup.post(
                "/v1/sign-in/apple", json: ["client_id": "com.acme.app", "identity_token": unknownKid])
            #expect(unknown.status == .unauthorized)
            #expect(unknown.problemCode == "unknown_key")
            let stillGood = try await setup.post("/v1/sign-in/apple", json: try signInBody(setup, subject: "a"))
            #expect(stillGood.status == .ok)
            #expect(try await readiness(setup.client)[path: "providers.apple"] as? String == "usable")
        }
    }

    @Test func intentSignInForAnUnknownIdentityDoesNotRedeemTheCode() async throws {
        try await AppleTestSetup.run { setup in
            let code = setup.apple.issueCode(clientID: "com.acme.app", subject: "stranger")
            let response = try await setup.post(
                "/v1/sign-in/apple", json: try signInBody(setup, subject: "stranger", code: code, intent: "sign_in"))
            #expect(response.status == .notFound)
            #expect(response.problemCode == "account_not_found")
            #expect(setup.apple.codeExchanges == 0)
            #expect(try await accountCount(setup) == 0)

            // The code is still good for the sign-up that follows.
            let body = try await setup.signIn(try signInBody(setup, subject: "stranger", code: code, intent: "sign_up"))
            #expect(body[path: "identity.has_provider_refresh_token"] as? Bool == true)
            #expect(setup.apple.codeExchanges == 1)
        }
    }

    @Test func aDisabledAccountDoesNotRedeemTheCode() async throws {
        try await AppleTestSetup.run { setup in
            let first = try await setup.signIn(try signInBody(setup, subject: "off"))
            let accountID = try #require((first[path: "account.id"] as? String).flatMap(UUID.init(uuidString:)))
            try await setup.app.database.client.query(
                "UPDATE accounts SET status = 'disabled' WHERE tenant_id = \(setup.tenant.id) AND id = \(accountID)")
            let code = setup.apple.issueCode(clientID: "com.acme.app", subject: "off")
            let response = try await setup.post("/v1/sign-in/apple", json: try signInBody(setup, subject: "off", code: code))
            #expect(response.status == .forbidden)
            #expect(response.problemCode == "account_disabled")
            #expect(setup.apple.codeExchanges == 0)
        }
    }

    @Test func aRefreshTokenWithoutAnIDTokenIsRevokedNotKept() async throws {
        try await AppleTestSetup.run { setup in
            setup.apple.tokenFault = .omitIDToken
            let code = setup.apple.issueCode(clientID: "com.acme.app", subject: "unproven")
            let body = try await setup.signIn(try signInBody(setup, subject: "unproven", code: code))
            #expect(body[path: "identity.has_provider_refresh_token"] as? Bool == false)
            #expect(try await eventually { setup.apple.revokedTokens.count == 1 })
            #expect(try await sealedRefreshTokenCount(setup) == 0)
        }
    }

    @Test func aCodeOfAnotherUserFailsAndItsRefreshTokenIsRevoked() async throws {
        try await AppleTestSetup.run { setup in
            setup.apple.tokenFault = .otherSubject
            let code = setup.apple.issueCode(clientID: "com.acme.app", subject: "victim")
            let response = try await setup.post("/v1/sign-in/apple", json: try signInBody(setup, subject: "victim", code: code))
            #expect(response.status == .badRequest)
            #expect(response.problemCode == "subject_mismatch")
            #expect(try await eventually { setup.apple.revokedTokens.count == 1 })
            #expect(try await accountCount(setup) == 0)
        }
    }

    @Test func aReplayedTokenWithAFreshCodeRevokesTheRedeemedRefreshToken() async throws {
        try await AppleTestSetup.run { setup in
            let token = try setup.token(subject: "replayer")
            _ = try await setup.signIn(["client_id": "com.acme.app", "identity_token": token])
            let code = setup.apple.issueCode(clientID: "com.acme.app", subject: "replayer")
            let replay = try await setup.post(
                "/v1/sign-in/apple", json: ["client_id": "com.acme.app", "identity_token": token, "authorization_code": code])
            #expect(replay.status == .unauthorized)
            #expect(replay.problemCode == "token_replayed")
            #expect(try await eventually { setup.apple.revokedTokens.count == 1 })
            #expect(try await sealedRefreshTokenCount(setup) == 0)
        }
    }

    func accountCount(_ setup: AppleTestSetup) async throws -> Int {
        try await count(setup, "SELECT count(*)::int FROM accounts WHERE tenant_id = \(setup.tenant.id)")
    }

    func sealedRefreshTokenCount(_ setup: AppleTestSetup) async throws -> Int {
        try await count(
            setup, "SELECT count(*)::int FROM identities WHERE tenant_id = \(setup.tenant.id) AND provider_refresh_token_sealed IS NOT NULL"
        )
    }

    func count(_ setup: AppleTestSetup, _ query: PostgresQuery) async throws -> Int {
        var count = 0
        for try await value in try await setup.app.database.client.query(query).decode(Int.self) { count = value }
        return count
    }
}

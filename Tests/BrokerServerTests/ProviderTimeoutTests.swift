import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import MockIdP
import TestSupport
import Testing

@testable import Providers

/// `BROKER_PROVIDER_TIMEOUT` bounds every outbound provider call, not only Graph's: a key set
/// fetch, Apple's code exchange and Apple's revocation (decision 0036). With a timeout of 1 s a
/// provider that hangs is answered 503 (`provider_unavailable`; `apple_unavailable` for Apple's
/// token endpoint), or the call throws, within the timeout plus a margin. scripts/test.sh runs this suite after the rest: under the whole suite
/// on two cores a task waiting on a deadline is resumed seconds late.
@Suite(.tags(.timing)) struct ProviderTimeoutTests {
    static let timeout = 1
    /// The timeout plus the margin the other timing suites allow.
    static let bound = Duration.seconds(timeout + 1)

    @Test func aKeySetFetchThatHangsIsProviderUnavailableWithinTheTimeout() async throws {
        try await ProviderTestSetup.run(graphTimeoutSeconds: Self.timeout) { setup in
            // The head at once, then one byte a second: the key set would take minutes.
            setup.google.keysFault = .slowBody
            let started = ContinuousClock.now
            let response = try await setup.post("/v1/sign-in/google", json: ["id_token": try setup.googleToken(subject: "g-hung")])
            let took = ContinuousClock.now - started
            print("Google key set hanging: answered \(response.status.code) \(response.problemCode ?? "") in \(took)")
            #expect(response.status == .serviceUnavailable)
            #expect(response.problemCode == "provider_unavailable")
            #expect(took < Self.bound, "answered in \(took)")
            #expect(took >= .seconds(Self.timeout), "answered in \(took): the limit is the provider timeout")
            #expect(try await readiness(setup.client)[path: "providers.google"] as? String == "unavailable")
            #expect(try await setup.count("accounts") == 0)
        }
    }

    @Test func anAppleCodeExchangeThatHangsIs503WithinTheTimeout() async throws {
        try await AppleTestSetup.run(providerTimeoutSeconds: Self.timeout) { setup in
            // Apple's keys are fetched (a sign-in without a code), then its token endpoint hangs.
            _ = try await setup.signIn(["client_id": "com.acme.app", "identity_token": try setup.token(subject: "warm")])
            setup.apple.tokenFault = .slowBody
            let code = setup.apple.issueCode(clientID: "com.acme.app", subject: "hung")
            let body: [String: Any] = [
                "client_id": "com.acme.app", "identity_token": try setup.token(subject: "hung"), "authorization_code": code,
            ]
            let started = ContinuousClock.now
            let response = try await setup.post("/v1/sign-in/apple", json: body)
            let took = ContinuousClock.now - started
            print("Apple token endpoint hanging: answered \(response.status.code) \(response.problemCode ?? "") in \(took)")
            // Apple's token endpoint has its own code for the same outage (ProviderFailure).
            #expect(response.status == .serviceUnavailable)
            #expect(response.problemCode == "apple_unavailable")
            #expect(setup.apple.codeExchanges == 1)
            #expect(took < Self.bound, "answered in \(took)")
            #expect(took >= .seconds(Self.timeout), "answered in \(took): the limit is the provider timeout")
        }
    }

    /// A provider timeout as long as the request's deadline (both 10 s by default, 2 s here):
    /// the call is cut to what the request has left, so Apple's outage is answered as one,
    /// `apple_unavailable`, not `request_timeout` (issue 39 F14: up to 12 of 12 were).
    @Test func aProviderTimeoutAsLongAsTheRequestsIsAnsweredAsTheProvidersOutage() async throws {
        let limits = HTTPLimits(requestTimeout: .seconds(2))
        try await AppleTestSetup.run(providerTimeoutSeconds: 2, httpLimits: limits) { setup in
            _ = try await setup.signIn(["client_id": "com.acme.app", "identity_token": try setup.token(subject: "warm")])
            setup.apple.tokenFault = .slowBody
            for attempt in 0..<3 {
                let code = setup.apple.issueCode(clientID: "com.acme.app", subject: "equal-\(attempt)")
                let body: [String: Any] = [
                    "client_id": "com.acme.app", "identity_token": try setup.token(subject: "equal-\(attempt)"), "authorization_code": code,
                ]
                let response = try await setup.post("/v1/sign-in/apple", json: body)
                #expect(response.status == .serviceUnavailable)
                #expect(response.problemCode == "apple_unavailable", "attempt \(attempt): \(response.problemCode ?? "")")
            }
        }
    }

    @Test func theRequestBudgetCutsACallToWhatTheRequestHasLeft() {
        let now = ContinuousClock.now
        #expect(RequestBudget.bound(.seconds(10), now: now) == .seconds(10), "outside a request: the call's own timeout")
        RequestBudget.$deadline.withValue(now.advanced(by: .seconds(10))) {
            #expect(RequestBudget.bound(.seconds(10), now: now) == .seconds(10) - RequestBudget.reserve)
            #expect(RequestBudget.bound(.seconds(3), now: now) == .seconds(3))
            #expect(RequestBudget.bound(.seconds(3), now: now.advanced(by: .seconds(9))) == .seconds(1) - RequestBudget.reserve)
            #expect(RequestBudget.bound(.seconds(3), now: now.advanced(by: .seconds(11))) == .zero)
        }
    }

    /// A port that accepts connections into its backlog and never answers: Apple hung before
    /// its head. The provider is built as the broker builds it, with the timeout given.
    @Test func appleCallsToAnEndpointThatNeverAnswersThrowWithinTheTimeout() async throws {
        let hung = try HeldPort(listening: true)
        defer { hung.close() }
        let logger = Logger(label: "test")
        let provider = AppleProvider(
            baseURL: "http://127.0.0.1:\(hung.port)", keys: JWKSCache(source: .fixed(Data(#"{"keys":[]}"#.utf8)), logger: logger),
            secrets: TestDatabase.secrets, timeout: .seconds(Self.timeout), logger: logger)
        let client = provider.tokenClient
        for call in ["revoke", "exchange"] {
            let started = ContinuousClock.now
            await #expect(throws: ProviderFailure.unavailable(.apple, .tokenEndpoint), "\(call)") {
                if call == "revoke" {
                    try await client.revoke(refreshToken: "r", clientID: "com.acme.app", clientSecret: "s")
                } else {
                    _ = try await client.exchange(code: "c", clientID: "com.acme.app", clientSecret: "s")
                }
            }
            let took = ContinuousClock.now - started
            print("Apple \(call) never answered: failed after \(took)")
            #expect(took < Self.bound, "\(call) took \(took)")
            #expect(took >= .seconds(Self.timeout), "\(call) took \(took): the limit is the provider timeout")
        }
    }
}

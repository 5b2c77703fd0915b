import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import MockIdP
import PostgresNIO
import Storage
import Testing

@testable import BrokerApplication
@testable import Providers

/// Apple's token endpoint failing (issue 25, decision 0049): sign-ins that need the code exchange
/// get 503 `provider_unavailable`, never a sign-in without it; after five failures in a row the
/// circuit opens and the next ones are refused without a call to Apple, while sign-ins that need
/// no exchange (Apple's keys are another endpoint) keep working.
@Suite struct ProviderCircuitTests {
    func withCode(_ setup: AppleTestSetup, _ subject: String) throws -> [String: Any] {
        [
            "client_id": "com.acme.app", "identity_token": try setup.token(subject: subject),
            "authorization_code": setup.apple.issueCode(clientID: "com.acme.app", subject: subject),
        ]
    }

    @Test func aFailingTokenEndpointOpensItsCircuitAndTheRestKeepsWorking() async throws {
        try await AppleTestSetup.run { setup in
            setup.apple.tokenFault = .answer(status: 503, body: Data())
            let before = setup.apple.codeExchanges
            for index in 0..<5 {
                let refused = try await setup.post("/v1/sign-in/apple", json: try withCode(setup, "down.\(index)"))
                #expect(refused.status == .serviceUnavailable)
                #expect(refused.problemCode == "apple_unavailable", "Apple's own code for its provider being down")
            }
            #expect(setup.apple.codeExchanges == before + 5, "each of the five reached Apple")
            let endpoint = "\(setup.app.services.appleBaseURL)/auth/token"
            #expect(ProviderCircuits.shared.isOpen(endpoint))

            let fast = try await setup.post("/v1/sign-in/apple", json: try withCode(setup, "down.fast"))
            #expect(fast.status == .serviceUnavailable)
            #expect(fast.problemCode == "apple_unavailable")
            #expect(fast.headers[.retryAfter] != nil)
            #expect(setup.apple.codeExchanges == before + 5, "an open circuit refuses without calling Apple")

            // Nothing was created by any of them.
            let accounts = try await setup.app.database.client.query("SELECT count(*)::int FROM accounts")
            for try await count in accounts.decode(Int.self) { #expect(count == 0) }

            // A sign-in that needs no exchange keeps working: Apple's keys have their own circuit.
            let plain = try await setup.post(
                "/v1/sign-in/apple", json: ["client_id": "com.acme.app", "identity_token": try setup.token(subject: "up.1")])
            #expect(plain.status == .ok)
        }
    }
}

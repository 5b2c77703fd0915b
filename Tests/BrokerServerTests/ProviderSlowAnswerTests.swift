import Foundation
import HTTPTypes
import HummingbirdTesting
import MockIdP
import TestSupport
import Testing

/// Issue 20 §5: the provider timeout covers the whole answer. A Graph that sends its head at
/// once and then one byte a second is answered 503 provider_unavailable within the timeout
/// plus a second (it was 10 s and `request_timeout`: AsyncHTTPClient's deadline ends at the
/// head), and nothing is created.
@Suite(.tags(.timing)) struct ProviderSlowAnswerTests {
    typealias S = ProviderTestSetup

    @Test(arguments: ["debug_token", "me"])
    func aGraphAnswerTricklingInIs503WithinTheTimeout(_ place: String) async throws {
        try await S.run(graphTimeoutSeconds: 2) { setup in
            if place == "debug_token" { setup.facebook.debugTokenFault = .slowBody } else { setup.facebook.meFault = .slowBody }
            let token = setup.facebook.issueAccessToken(appID: S.appID, userID: "10001")
            let started = ContinuousClock.now
            let response = try await setup.post("/v1/sign-in/facebook", json: ["access_token": token])
            let took = ContinuousClock.now - started
            print("\(place) trickling in: answered \(response.status.code) \(response.problemCode ?? "") in \(took)")
            #expect(response.status == .serviceUnavailable)
            #expect(response.problemCode == "provider_unavailable")
            #expect(took < .seconds(3), "answered in \(took)")
            #expect(took >= .seconds(2), "answered in \(took): the limit is the provider timeout")
            #expect(try await setup.count("accounts") == 0)
            #expect(try await setup.count("sessions") == 0)
        }
    }
}

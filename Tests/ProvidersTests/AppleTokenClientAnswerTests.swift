import BrokerCore
import Foundation
import MockIdP
import TestSupport
import Testing

@testable import Providers

/// Issue 20 §2 and §5 for Apple's token endpoint: the time limit covers the whole answer, and
/// the answer's members are read with their types and ranges checked.
@Suite(.tags(.timing)) struct AppleTokenClientAnswerTests {
    @Test func anAnswerTricklingInIsCutOffAtTheTimeout() async throws {
        try await MockAppleServer.with { apple, baseURL in
            apple.tokenFault = .slowBody
            let client = AppleTokenClient(baseURL: baseURL, timeout: .seconds(2))
            let started = ContinuousClock.now
            await #expect(throws: ProviderFailure.unavailable(.apple, .tokenEndpoint)) {
                _ = try await client.exchange(code: "c", clientID: "com.acme.app", clientSecret: "s")
            }
            let took = ContinuousClock.now - started
            print("Apple token answer trickling in: exchange failed after \(took)")
            #expect(took < .seconds(3), "took \(took)")
        }
    }

    @Test func membersAreReadWithTheirTypesAndRanges() {
        func read(_ text: String) -> AppleTokenClient.TokenResponse? { .init(json: Array(text.utf8)) }
        let good = read(#"{"access_token":"a","expires_in":3600,"refresh_token":"r","id_token":"i","token_type":"Bearer"}"#)
        #expect(good?.expiresIn == 3600)
        #expect(good?.refreshToken == "r")
        #expect(read(#"{"refresh_token":"r"}"#)?.expiresIn == nil)
        for odd in ["1e300", "-1", "1.5", "\"3600\"", "null", "[]", "9223372036854775808"] {
            #expect(read(#"{"refresh_token":"r","expires_in":\#(odd)}"#) == nil, "expires_in \(odd)")
        }
        for odd in ["5", "null", "{}", "\"" + String(repeating: "r", count: 20_000) + "\""] {
            #expect(read(#"{"refresh_token":\#(odd)}"#) == nil, "refresh_token \(odd.prefix(8))")
        }
        #expect(read(String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)) == nil)
        #expect(AppleTokenClient.TokenResponse(json: [0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D]) == nil)
    }
}

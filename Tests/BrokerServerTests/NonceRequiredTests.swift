import BrokerCore
import BrokerApplication
import BrokerServer
import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Storage
import TestSupport
import Testing

/// A client that requires a nonce refuses a sign-in without one, whether or not the token
/// carries a nonce (decision 0016).
@Suite struct NonceRequiredTests {
    @Test func aSignInWithoutTheNonceIsRefusedWhetherOrNotTheTokenCarriesOne() async throws {
        try await AppleTestSetup.run { setup in
            let raw = "raw-nonce-for-strict"
            let bound = try setup.token(subject: "strict.user", clientID: "com.acme.strict", nonce: AppleTestSetup.sha256Hex(raw))
            let unbound = try setup.token(subject: "strict.user", clientID: "com.acme.strict")
            for token in [bound, unbound] {
                for nonce: String? in [nil, ""] {
                    var body: [String: Any] = ["client_id": "com.acme.strict", "identity_token": token]
                    if let nonce { body["nonce"] = nonce }
                    let refused = try await setup.post("/v1/sign-in/apple", json: body)
                    #expect(refused.status == .badRequest)
                    #expect(refused.problemCode == "nonce_required")
                }
            }
            // Nothing was created by the refusals; the nonce-bound token then signs in with its nonce.
            let ok = try await setup.post(
                "/v1/sign-in/apple", json: ["client_id": "com.acme.strict", "identity_token": bound, "nonce": raw])
            #expect(ok.status == .ok)
            #expect(try ok.json()["is_new_account"] as? Bool == true)
            // A wrong nonce is still a mismatch.
            let wrong = try await setup.post(
                "/v1/sign-in/apple",
                json: [
                    "client_id": "com.acme.strict",
                    "identity_token": try setup.token(
                        subject: "strict.user", clientID: "com.acme.strict", nonce: AppleTestSetup.sha256Hex(raw)), "nonce": "other",
                ])
            #expect(wrong.problemCode == "nonce_mismatch")
        }
    }

    @Test func turningTheRequirementOffAndOnReachesTheSignInRoute() async throws {
        try await AppleTestSetup.run { setup in
            let admin = AppleAdmin(database: setup.app.database, actor: "test")
            let off = try await admin.setNonceRequired(tenant: "acme", clientID: "com.acme.strict", false)
            #expect(off.nonceRequired == false)
            // The cached client is invalidated through LISTEN/NOTIFY within moments.
            #expect(
                try await eventually {
                    try await setup.post(
                        "/v1/sign-in/apple",
                        json: [
                            "client_id": "com.acme.strict",
                            "identity_token": try setup.token(subject: "relaxed", clientID: "com.acme.strict"),
                        ]
                    ).status == .ok
                })
            _ = try await admin.setNonceRequired(tenant: "acme", clientID: "com.acme.strict", true)
            #expect(
                try await eventually {
                    try await setup.post(
                        "/v1/sign-in/apple",
                        json: [
                            "client_id": "com.acme.strict",
                            "identity_token": try setup.token(subject: "relaxed", clientID: "com.acme.strict"),
                        ]
                    ).problemCode == "nonce_required"
                })
            await #expect(throws: BrokerError.self) { try await admin.setNonceRequired(tenant: "acme", clientID: "com.nobody", true) }
        }
    }
}

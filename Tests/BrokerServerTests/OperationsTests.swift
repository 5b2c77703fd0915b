import BrokerApplication
import BrokerServer
import Foundation
import HTTPTypes
import NIOCore
import HummingbirdTesting
import MockIdP
import TestSupport
import Testing

@Suite struct OperationsTests {
    @Test func healthReadinessAndMetrics() async throws {
        // Every provider at a closed port (127.0.0.1:9, TestApp's default) and no tenant: ready
        // all the same, nothing fetched (decision 0036).
        try await TestApp.run { _, client in
            try await client.execute(uri: "/healthz", method: .get) { response in
                #expect(response.status == .ok)
                let body = try response.json()
                #expect(body["status"] as? String == "ok")
            }
            let ready = try await readiness(client)
            #expect(ready["status"] as? String == "ok")
            #expect(ready["providers"] as? [String: String] == ["apple": "unused", "google": "unused", "facebook": "unused"])
            try await client.execute(uri: "/metrics", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType]?.hasPrefix("text/plain") == true)
                let text = String(buffer: response.body)
                #expect(text.contains("hb_requests{http_route=\"/healthz\""))
                #expect(text.contains("http_server_request_duration_bucket"))
                for provider in ["apple", "google", "facebook"] {
                    #expect(text.contains("broker_provider_keys_usable{provider=\"\(provider)\"} 0.0\n"), "\(provider)")
                }
            }
        }
    }

    @Test func noKeySetIsFetchedBeforeASignInNeedsIt() async throws {
        try await ProviderTestSetup.run { setup in
            // The old refresh loops fetched every key set at start, long before a readiness round trip.
            let ready = try await readiness(setup.client)
            #expect(ready["providers"] as? [String: String] == ["apple": "unused", "google": "unused", "facebook": "unused"])
            #expect(setup.mocks.apple.keyFetches == 0)
            #expect(setup.google.keyFetches == 0)
            #expect(setup.facebook.keyFetches == 0)
        }
    }

    @Test func aProviderWithoutKeysNeverMakesTheInstanceUnready() async throws {
        try await ProviderTestSetup.run(appleBaseURL: "http://127.0.0.1:9") { setup in
            // Apple is unreachable: its sign-ins answer 503, the instance stays ready.
            let p8 = ProviderTestSetup.p8PEM
            let admin = AppleAdmin(database: setup.app.database, actor: "test")
            _ = try await admin.setTeam(
                tenant: "acme", teamID: "TEAM000001", keyID: "KEY0000001", p8PEM: p8, secrets: setup.app.secrets)
            _ = try await admin.addGroup(tenant: "acme", primaryAppID: "com.acme.app", nonceRequired: false)
            let appleToken = try setup.mocks.apple.mint(setup.mocks.apple.claims(subject: "a-0001", audience: "com.acme.app"))
            let appleSignIn = ["client_id": "com.acme.app", "identity_token": appleToken]
            let refused = try await setup.post("/v1/sign-in/apple", json: appleSignIn)
            #expect(refused.status == .serviceUnavailable)
            #expect(refused.problemCode == "provider_unavailable")
            var ready = try await readiness(setup.client)
            #expect(ready["providers"] as? [String: String] == ["apple": "unavailable", "google": "unused", "facebook": "unused"])

            // Google is reachable: its sign-ins succeed while Apple's still answer 503.
            let google = try await setup.post("/v1/sign-in/google", json: ["id_token": try setup.googleToken(subject: "g-0001")])
            #expect(google.status == .ok)
            #expect(try await setup.post("/v1/sign-in/apple", json: appleSignIn).problemCode == "provider_unavailable")
            ready = try await readiness(setup.client)
            #expect(ready["status"] as? String == "ok")
            #expect(ready["providers"] as? [String: String] == ["apple": "unavailable", "google": "usable", "facebook": "unused"])
            let metrics = String(buffer: try await setup.client.execute(uri: "/metrics", method: .get).body)
            #expect(metrics.contains("broker_provider_keys_usable{provider=\"apple\"} 0.0\n"))
            #expect(metrics.contains("broker_provider_keys_usable{provider=\"google\"} 1.0\n"))
            #expect(metrics.contains("broker_provider_keys_usable{provider=\"facebook\"} 0.0\n"))
        }
    }

    @Test func unknownRoutesAreProblemJSON() async throws {
        try await TestApp.run { _, client in
            try await client.execute(uri: "/no/such/route", method: .get) { response in
                #expect(response.status == .notFound)
                #expect(response.headers[.contentType] == "application/problem+json")
                let problem = try response.json()
                #expect(problem["code"] as? String == "not_found")
                #expect(problem["status"] as? Int == 404)
                #expect(problem["type"] as? String == "urn:identitybroker:problem:not_found")
                #expect(problem["instance"] as? String == "/no/such/route")
                #expect(problem["request_id"] as? String == response.headers[HTTPField.Name("X-Request-Id")!])
            }
        }
    }

    @Test func oversizedBodiesAreRefused() async throws {
        try await TestApp.run { _, client in
            let body = ByteBuffer(repeating: UInt8(ascii: "a"), count: 40_000)
            try await client.execute(uri: "/v1/tenant", method: .post, body: body) { response in
                #expect(response.status == .contentTooLarge)
                #expect(response.problemCode == "payload_too_large")
            }
        }
    }
}

/// `/readyz`'s body once it answers 200: within milliseconds alone; a loaded test run (every
/// suite at once on two cores) can hold the readiness ping past its 800 ms.
func readiness(_ client: any TestClientProtocol) async throws -> [String: Any] {
    var body: [String: Any] = [:]
    let ready = try await eventually(timeout: .seconds(30)) {
        let response = try await client.execute(uri: "/readyz", method: .get)
        guard response.status == .ok else { return false }
        body = try response.json()
        return true
    }
    #expect(ready, "/readyz did not answer 200")
    return body
}

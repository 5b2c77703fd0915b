import Foundation
import HTTPTypes
import NIOCore
import HummingbirdTesting
import TestSupport
import Testing

@Suite struct OperationsTests {
    @Test func healthReadinessAndMetrics() async throws {
        // Ready needs Apple's keys fetched once (AppleProviderFaultTests covers Apple down).
        try await MockAppleServer.with { _, appleURL in try await healthReadinessAndMetrics(appleURL) }
    }

    func healthReadinessAndMetrics(_ appleURL: String) async throws {
        try await TestApp.run(appleBaseURL: appleURL) { _, client in
            try await client.execute(uri: "/healthz", method: .get) { response in
                #expect(response.status == .ok)
                let body = try response.json()
                #expect(body["status"] as? String == "ok")
            }
            // Within seconds alone; a loaded test run (every suite at once on two cores) can take longer.
            #expect(try await eventually(timeout: .seconds(30)) { try await client.execute(uri: "/readyz", method: .get).status == .ok })
            try await client.execute(uri: "/metrics", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType]?.hasPrefix("text/plain") == true)
                let text = String(buffer: response.body)
                #expect(text.contains("hb_requests{http_route=\"/healthz\""))
                #expect(text.contains("http_server_request_duration_bucket"))
            }
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

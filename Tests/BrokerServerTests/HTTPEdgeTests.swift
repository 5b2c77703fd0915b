import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import TestSupport
import Testing

/// Requests that are wrong at the HTTP level get a problem with a stable code, never a 500 or
/// an empty answer (issue 9 §6).
@Suite struct HTTPEdgeTests {
    @Test func aNULInAPathParameterIsA404NotA500() async throws {
        try await TestApp.run { _, client in
            for uri in ["/t/%00/.well-known/jwks.json", "/t/%00/.well-known/openid-configuration", "/t/ac%00me/.well-known/jwks.json"] {
                let response = try await client.execute(uri: uri, method: .get)
                #expect(response.status == .notFound, "\(uri)")
                #expect(response.problemCode == "tenant_not_found")
            }
        }
    }

    @Test func aNULInAJSONBodyIsInvalidRequest() async throws {
        try await AppleTestSetup.run { setup in
            let bodies = [
                #"{"client_id":"com.acme\u0000.app","identity_token":"x.y.z"}"#,
                #"{"client_id":"com.acme.app","identity_token":"x.y.z","user":{"name":{"firstName":"A\u0000"}}}"#,
            ]
            for body in bodies {
                let response = try await setup.client.execute(
                    uri: "/v1/sign-in/apple", method: .post,
                    headers: [.authorization: "Bearer \(setup.apiKey)", .contentType: "application/json"],
                    body: ByteBuffer(string: body))
                #expect(response.status == .badRequest)
                #expect(response.problemCode == "invalid_request")
            }
            let refresh = try await setup.client.execute(
                uri: "/v1/sessions/refresh", method: .post,
                headers: [.authorization: "Bearer \(setup.apiKey)", .contentType: "application/json"],
                body: ByteBuffer(string: #"{"refresh_token":"ibr_\u0000"}"#))
            #expect(refresh.status == .badRequest)
            #expect(refresh.problemCode == "invalid_request")
        }
    }

    @Test(arguments: ["/v1/sessions/refresh", "/v1/sessions/introspect", "/v1/sessions/revoke"])
    func bodiesRepeatingAMemberAreRefusedEverywhere(_ path: String) async throws {
        try await AppleTestSetup.run { setup in
            let member = path.hasSuffix("refresh") ? "refresh_token" : "token"
            let response = try await setup.client.execute(
                uri: path, method: .post,
                headers: [.authorization: "Bearer \(setup.apiKey)", .contentType: "application/json"],
                body: ByteBuffer(string: #"{"\#(member)":"a","\#(member)":"b"}"#))
            #expect(response.status == .badRequest)
            #expect(response.problemCode == "invalid_request")
            #expect(String(buffer: response.body).contains("repeats a member name"))
        }
    }

    /// Schemathesis ST201: no request schema allows null, and the generated decoders would have
    /// read a null member as an absent one.
    @Test(arguments: ["/v1/sessions/introspect", "/v1/sessions/revoke"])
    func aNullMemberIsRefused(_ path: String) async throws {
        try await AppleTestSetup.run { setup in
            let response = try await setup.client.execute(
                uri: path, method: .post,
                headers: [.authorization: "Bearer \(setup.apiKey)", .contentType: "application/json"],
                body: ByteBuffer(string: #"{"token":"x","token_type_hint":null}"#))
            #expect(response.status == .badRequest)
            #expect(response.problemCode == "invalid_request")
            #expect(String(buffer: response.body).contains("'token_type_hint' is null"))
            // TokenRequest.token's maxLength.
            let long = try await setup.client.execute(
                uri: path, method: .post,
                headers: [.authorization: "Bearer \(setup.apiKey)", .contentType: "application/json"],
                body: ByteBuffer(string: #"{"token":"\#(String(repeating: "a", count: 16_385))"}"#))
            #expect(long.status == .badRequest)
            #expect(long.problemCode == "invalid_request")
        }
    }

    /// Schemathesis ST203: without an API key, an API route is 401 whatever its body, before the
    /// body is checked; with a key, the body's problem is reported.
    @Test func aRequestWithoutAKeyIs401BeforeItsBodyIsChecked() async throws {
        try await AppleTestSetup.run { setup in
            let wrong = #"{"access_token":"a","limited_login_token":"b"}"#
            for path in ["/v1/sign-in/facebook", "/v1/sessions/refresh", "/v1/accounts/import"] {
                let response = try await setup.client.execute(
                    uri: path, method: .post, headers: [.contentType: "application/json"], body: ByteBuffer(string: wrong))
                #expect(response.status == .unauthorized, "\(path)")
                #expect(response.problemCode == "missing_api_key")
            }
            let keyed = try await setup.client.execute(
                uri: "/v1/sessions/refresh", method: .post,
                headers: [.authorization: "Bearer \(setup.apiKey)", .contentType: "application/json"], body: ByteBuffer(string: wrong))
            #expect(keyed.status == .badRequest)
            // Unknown paths and methods keep their 404 and 405.
            #expect(try await setup.client.execute(uri: "/v1/nothing", method: .post).status == .notFound)
            #expect(try await setup.client.execute(uri: "/v1/sessions/refresh", method: .get).status == .methodNotAllowed)
        }
    }

    @Test func anUnknownMethodOnAKnownPathIs405WithAllow() async throws {
        try await TestApp.run { _, client in
            let cases: [(String, HTTPRequest.Method, String)] = [
                ("/v1/sign-in/apple", .get, "POST"),
                ("/v1/sessions/refresh", .delete, "POST"),
                ("/healthz", .post, "GET"),
                ("/t/acme/.well-known/jwks.json", .put, "GET"),
                // A literal segment is its own route, not the parameter's (schemathesis ST205).
                ("/v1/accounts/import", .options, "POST"),
                ("/v1/accounts/4d7e0c4e-0000-4000-8000-000000000000", .put, "DELETE, GET"),
            ]
            for (uri, method, allow) in cases {
                let response = try await client.execute(uri: uri, method: method)
                #expect(response.status == .methodNotAllowed, "\(method) \(uri)")
                #expect(response.headers[.allow] == allow)
                #expect(response.problemCode == "method_not_allowed")
            }
            // A path no route has stays 404.
            #expect(try await client.execute(uri: "/v1/nothing", method: .delete).status == .notFound)
        }
    }

    @Test func aHeaderBlockOverTheLimitIsAProblem() async throws {
        try await TestApp.run(mode: .live) { _, client in
            let port = try #require(client.port)
            var request = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            for index in 0..<12 { request += "X-Filler-\(index): \(String(repeating: "a", count: 8_000))\r\n" }
            request += "\r\n"
            let answer = String(decoding: try await RawHTTP.exchange(port: port, Array(request.utf8)), as: UTF8.self)
            #expect(answer.hasPrefix("HTTP/1.1 431 "), "\(answer.prefix(200))")
            #expect(answer.lowercased().contains("content-type: application/problem+json"))
            #expect(answer.contains(#""code":"headers_too_large""#))
            // A request line that is not HTTP gets a problem too.
            let garbage = String(decoding: try await RawHTTP.exchange(port: port, Array("HELLO\r\n\r\n".utf8)), as: UTF8.self)
            #expect(garbage.hasPrefix("HTTP/1.1 400 "), "\(garbage.prefix(200))")
            #expect(garbage.contains(#""code":"invalid_request""#))
            // The server is fine afterwards.
            #expect(try await client.execute(uri: "/healthz", method: .get).status == .ok)
        }
    }
}

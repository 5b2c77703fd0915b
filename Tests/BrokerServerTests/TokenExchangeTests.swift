import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import MockIdP
import NIOCore
import PostgresNIO
import Providers
import Storage
import TestSupport
import Testing

/// Token exchange at a tenant's token endpoint (RFC 8693, issue 42 §2, decision 0083): a mobile
/// app (a public client) trades Apple's identity token for the broker's tokens with a stock OAuth
/// library. The same verification, replay refusal and account as `POST /v1/sign-in/apple`.
@Suite(.timeLimit(.minutes(10))) struct TokenExchangeTests {
    static func exchange(_ setup: AppleTestSetup, _ fields: [(String, String)]) async throws -> (Int, [String: Any]) {
        let response = try await setup.client.execute(
            uri: "/t/acme/token", method: .post, headers: [.contentType: "application/x-www-form-urlencoded"],
            body: ByteBuffer(string: FormEncoding.encode(fields)))
        return (Int(response.status.code), (try? response.json()) ?? [:])
    }

    static func fields(client: String, token: String) -> [(String, String)] {
        [
            ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"), ("client_id", client), ("subject_token", token),
            ("subject_token_type", "urn:ietf:params:oauth:token-type:id_token"),
        ]
    }

    static func idTokenClaims(_ body: [String: Any]) throws -> [String: Any] {
        let token = try #require(body["id_token"] as? String)
        let payload = try #require(Base64URL.decode(String(token.split(separator: ".")[1])))
        return try #require(try JSONSerialization.jsonObject(with: payload) as? [String: Any])
    }

    @Test func anAppAppleTokenBecomesTheBrokersTokensOfTheNativeAccountOnce() async throws {
        try await AppleTestSetup.run { setup in
            let app = try await ClientAdmin(database: setup.app.database, actor: "test").create(
                tenant: "acme", name: "ios", redirectURIs: ["com.acme.app:/cb"], isPublic: true, allowLoopback: false)
            let client = app.client.clientID
            let subject = "000123.exchange0000000000000000000.0001"
            let native = try await setup.signIn(["client_id": "com.acme.app", "identity_token": try setup.token(subject: subject)])
            let accountID = try #require(native[path: "account.id"] as? String)

            let token = try setup.token(subject: subject)
            let (status, body) = try await Self.exchange(setup, Self.fields(client: client, token: token))
            #expect(status == 200, "\(body)")
            #expect(body["issued_token_type"] as? String == "urn:ietf:params:oauth:token-type:access_token")
            #expect(body["token_type"] as? String == "Bearer")
            #expect(body["refresh_token"] is String)
            let claims = try Self.idTokenClaims(body)
            #expect(claims["sub"] as? String == accountID)
            #expect(claims["aud"] as? String == client || (claims["aud"] as? [String]) == [client])
            #expect(claims["idp"] as? String == "apple")

            // The same token again, here or at the REST API: refused, nothing opened.
            let (again, refused) = try await Self.exchange(setup, Self.fields(client: client, token: token))
            #expect(again == 400 && refused["error"] as? String == "invalid_grant", "\(refused)")
            let native2 = try await setup.post("/v1/sign-in/apple", json: ["client_id": "com.acme.app", "identity_token": token])
            #expect(try native2.json()["code"] as? String == "token_replayed")

            // The refresh token is the app's: it refreshes at the token endpoint.
            let refresh = try #require(body["refresh_token"] as? String)
            let (refreshed, next) = try await Self.exchange(
                setup, [("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", client)])
            #expect(refreshed == 200, "\(next)")
        }
    }

    @Test func whatIsNotAGoodSubjectTokenIsRefused() async throws {
        try await AppleTestSetup.run { setup in
            let app = try await ClientAdmin(database: setup.app.database, actor: "test").create(
                tenant: "acme", name: "ios", redirectURIs: ["com.acme.app:/cb"], isPublic: true, allowLoopback: false)
            let client = app.client.clientID
            let good = try setup.token(subject: "000123.refused00000000000000000000.0001")
            let cases: [([(String, String)], String)] = [
                (Self.fields(client: client, token: "not-a-jwt"), "invalid_grant"),
                (Self.fields(client: client, token: try setup.token(subject: "000123.x", clientID: "com.other.app")), "invalid_grant"),
                (Self.fields(client: client, token: good).filter { $0.0 != "subject_token_type" }, "invalid_request"),
                (
                    Self.fields(client: client, token: good).map {
                        $0.0 == "subject_token_type" ? ($0.0, "urn:ietf:params:oauth:token-type:access_token") : $0
                    }, "invalid_request"
                ),
                (Self.fields(client: client, token: good) + [("requested_token_type", "urn:x")], "invalid_request"),
                (Self.fields(client: "ibc_AAAAAAAAAAAAAAAAAAAAAA", token: good), "invalid_client"),
            ]
            for (fields, error) in cases {
                let (status, body) = try await Self.exchange(setup, fields)
                #expect(body["error"] as? String == error, "\(status) \(body)")
            }
            let rows = try await setup.app.database.client.query("SELECT count(*)::int8 FROM sessions")
            for try await count in rows.decode(Int.self) { #expect(count == 0, "nothing opened by a refused exchange") }
            // The good token was never spent by the refusals: it still signs in.
            let (status, body) = try await Self.exchange(setup, Self.fields(client: client, token: good))
            #expect(status == 200, "\(body)")
        }
    }
}

import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Testing
import TestSupport

/// The tenant's OpenID Provider endpoints with PostgreSQL stopped, against the real `broker
/// serve` (issue 42 §2, faults): each answers in bounded time in its own form (the token and
/// userinfo endpoints `temporarily_unavailable` JSON with `Retry-After`, the authorization
/// endpoint a 503 page, never a redirect), and all answer as before once PostgreSQL is back.
@Suite(.tags(.outage), .serialized) struct OpenIDProviderOutageTests {
    struct Answer {
        let status: Int
        let body: String
        let headers: HTTPHeaders
        let seconds: Double
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]) ?? [:] }
    }

    static func send(_ method: HTTPMethod, _ url: String, headers: [(String, String)] = [], form: String? = nil) async -> Answer {
        let start = ContinuousClock.now
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let form {
            request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
            request.body = .bytes(ByteBuffer(string: form))
        }
        guard let response = try? await HTTPClient.shared.execute(request, timeout: .seconds(30)),
            let body = try? await response.body.collect(upTo: 1 << 20)
        else { return Answer(status: 0, body: "", headers: [:], seconds: (ContinuousClock.now - start).seconds) }
        return Answer(
            status: Int(response.status.code), body: String(buffer: body), headers: response.headers,
            seconds: (ContinuousClock.now - start).seconds)
    }

    @Test func theEndpointsAnswerInTheirOwnFormWhileThePostgresIsDown() async throws {
        let cluster = try await OwnCluster.create()
        defer { cluster.destroy() }
        try await cluster.start()
        try await Outage.withBroker(cluster, extra: ["BROKER_REQUEST_TIMEOUT": "3", "BROKER_DB_STATEMENT_TIMEOUT": "2"]) { broker, cli in
            let created = try await cli.run(
                "client", "create", "--tenant", "acme", "--name", "web", "--redirect-uri", "https://app.example.com/callback", "--json")
            let object = try created.object()
            let clientID = try #require(object["client_id"] as? String)
            let secret = try #require(object["client_secret"] as? String)
            let basic = ("Authorization", "Basic " + Data("\(clientID):\(secret)".utf8).base64EncodedString())
            let token = {
                await Self.send(
                    .POST, "\(broker.base)/t/acme/token", headers: [basic],
                    form: "grant_type=authorization_code&code=nope&redirect_uri=https%3A%2F%2Fapp.example.com%2Fcallback")
            }
            let authorize = { (clientID: String) in
                await Self.send(
                    .GET,
                    "\(broker.base)/t/acme/authorize?response_type=code&scope=openid&client_id=\(clientID)&redirect_uri=https%3A%2F%2Fapp.example.com%2Fcallback&state=s"
                )
            }
            // A client no request has asked for yet: with PostgreSQL down it cannot be known.
            let cold = try #require(
                try await cli.run(
                    "client", "create", "--tenant", "acme", "--name", "cold", "--redirect-uri", "https://app.example.com/callback", "--json"
                ).object()["client_id"] as? String)
            let userinfo = { await Self.send(.GET, "\(broker.base)/t/acme/userinfo", headers: [("Authorization", "Bearer eyJ.x.y")]) }

            // Up: an unknown code, the page, a bad token.
            #expect(await token().json["error"] as? String == "invalid_grant")
            #expect(await authorize(clientID).status == 200)
            #expect(await userinfo().status == 401)

            await cluster.stop(mode: "fast")
            let downToken = await token()
            print("token endpoint with PostgreSQL down: \(downToken.status) in \(downToken.seconds) s")
            #expect(downToken.status == 503, "\(downToken.body)")
            #expect(downToken.json["error"] as? String == "temporarily_unavailable")
            #expect(downToken.headers.first(name: "Retry-After") != nil)
            #expect(downToken.seconds < Outage.answerBound)
            let downPage = await authorize(cold)
            #expect(downPage.status == 503, "\(downPage.body.prefix(200))")
            #expect(downPage.headers.first(name: "Location") == nil, "never a redirect before the client is known")
            #expect(downPage.headers.first(name: "Content-Type")?.hasPrefix("text/html") == true)
            #expect(downPage.seconds < Outage.answerBound)
            // The client asked for a moment ago may still be in the broker's caches (5 s): then
            // the page shows, and choosing a provider is what needs the database.
            let warmPage = await authorize(clientID)
            #expect([200, 503].contains(warmPage.status), "\(warmPage.body.prefix(200))")
            #expect(warmPage.headers.first(name: "Location") == nil)
            #expect(warmPage.seconds < Outage.answerBound)
            // Userinfo's token does not verify before the database is asked: 401 either way; a
            // well-formed one would be 503 (the tenant is read first).
            #expect(await userinfo().status != 500)

            try await cluster.start()
            var back = await token()
            let deadline = ContinuousClock.now + .seconds(10)
            while back.status == 503, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
                back = await token()
            }
            #expect(back.json["error"] as? String == "invalid_grant", "\(back.body)")
            #expect(await authorize(cold).status == 200)
        }
    }
}

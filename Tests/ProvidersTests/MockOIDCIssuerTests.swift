import AsyncHTTPClient
import Foundation
import Hummingbird
import JWTKit
import MockIdP
import NIOCore
import NIOHTTP1
import TestSupport
import Testing

/// MockIdP's generic OpenID Connect issuer over HTTP: discovery and key set (single- and
/// multi-tenant), tokens of every algorithm verifying against the served keys with jwt-kit,
/// rotation, and each fault. Hangs are seen through a client-side timeout; the tests wait on
/// events (``MockOIDCIssuer/waitUntilHanging(_:)``, the server's end), never on sleeps.
// A guard against a hang, not a bound on speed: every suite runs at once, so a test here takes
// about as long as the whole run (150-160 s on two cores), whatever it takes alone (1-20 s).
@Suite(.timeLimit(.minutes(10))) struct MockOIDCIssuerTests {
    /// The claims of an id token the tests read back after verifying.
    struct IDToken: JWTPayload {
        var iss: IssuerClaim
        var sub: SubjectClaim
        var aud: AudienceClaim
        var exp: ExpirationClaim
        var iat: IssuedAtClaim
        var nonce: String?
        var email: String?
        var email_verified: Bool?
        var tid: String?

        func verify(using algorithm: some JWTAlgorithm) async throws {
            try exp.verifyNotExpired()
        }
    }

    struct Answer {
        let status: Int
        let body: Data

        func json() throws -> [String: Any] {
            try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
        }
    }

    static func get(_ url: String, timeout: TimeAmount = .seconds(10)) async throws -> Answer {
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: url), timeout: timeout)
        let body = try await response.body.collect(upTo: 1 << 20)
        return Answer(status: Int(response.status.code), body: Data(body.readableBytesView))
    }

    static func post(_ url: String, json: String) async throws -> Answer {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(string: json))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 1 << 20)
        return Answer(status: Int(response.status.code), body: Data(body.readableBytesView))
    }

    /// A key collection holding the key set at `url`.
    static func keys(at url: String) async throws -> JWTKeyCollection {
        let answer = try await get(url)
        #expect(answer.status == 200)
        return try await JWTKeyCollection().add(jwksJSON: String(decoding: answer.body, as: UTF8.self))
    }

    /// The `kid` and `alg` of a token's header.
    static func header(_ token: String) throws -> (kid: String?, alg: String?) {
        let segment = try #require(token.split(separator: ".").first)
        var base64 = segment.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        let data = try #require(Data(base64Encoded: base64))
        let header = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        return (header["kid"] as? String, header["alg"] as? String)
    }

    /// MockIdP on 127.0.0.1 (a free port) serving `issuers` only, for the duration of `body`,
    /// which gets the base URL; ended by graceful shutdown, its end awaited (``ServedApplication``).
    static func withServer<T: Sendable>(_ issuers: [MockOIDCIssuer], _ body: @Sendable (String) async throws -> T) async throws -> T {
        try await ServedApplication.with({ listening in
            MockIdPServer.application(apple: nil, google: nil, facebook: nil, oidc: issuers, port: 0) { port in listening(port) }
        }) { port in
            try await body("http://127.0.0.1:\(port)")
        }
    }

    @Test func discoveryNamesTheIssuerItsKeysAndAlgorithms() async throws {
        let line = try MockOIDCIssuer(name: "line")
        try await Self.withServer([line]) { base in
            #expect(line.issuer(base: base) == base + "/oidc/line")
            #expect(line.discoveryURL(base: base) == base + "/oidc/line/.well-known/openid-configuration")
            let discovery = try await Self.get(line.discoveryURL(base: base))
            #expect(discovery.status == 200)
            let document = try discovery.json()
            #expect(document["issuer"] as? String == base + "/oidc/line")
            #expect(document["jwks_uri"] as? String == base + "/oidc/line/keys")
            #expect(document["authorization_endpoint"] as? String == base + "/oidc/line/authorize")
            #expect(document["token_endpoint"] as? String == base + "/oidc/line/token")
            #expect(document["id_token_signing_alg_values_supported"] as? [String] == ["RS256", "ES256"])
            #expect((document["response_types_supported"] as? [String])?.contains("code") == true)
            #expect(document["subject_types_supported"] as? [String] == ["public"])

            let keys = try await Self.get(try #require(document["jwks_uri"] as? String))
            #expect(keys.status == 200)
            let set = try #require(try keys.json()["keys"] as? [[String: String]])
            #expect(set.map { $0["kid"] } == line.publishedKeyIDs)
            #expect(set.map { $0["kty"] } == ["RSA", "EC"])
            #expect(set.map { $0["alg"] } == ["RS256", "ES256"])
            #expect(set.last?["crv"] == "P-256")
            #expect(line.discoveryFetches == 1)
            #expect(line.keyFetches == 1)
        }
    }

    @Test(arguments: MockOIDCIssuer.Algorithm.allCases)
    func mintedTokensVerifyAgainstTheServedKeys(_ algorithm: MockOIDCIssuer.Algorithm) async throws {
        let yahoo = try MockOIDCIssuer(name: "yahoo-japan", algorithms: [.rs256, .ps256, .es256])
        try await Self.withServer([yahoo]) { base in
            let keys = try await Self.keys(at: yahoo.jwksURL(base: base))
            let now = Date()
            let token = try yahoo.mintIDToken(
                base: base, subject: "u-1", audience: "client-1", nonce: "n-1", email: "a@example.com", now: now,
                algorithm: algorithm)
            #expect(try Self.header(token).kid == yahoo.currentKeyID(algorithm))
            #expect(try Self.header(token).alg == algorithm.rawValue)
            let payload = try await keys.verify(token, as: IDToken.self)
            #expect(payload.iss.value == base + "/oidc/yahoo-japan")
            #expect(payload.sub.value == "u-1")
            #expect(payload.aud.value == ["client-1"])
            #expect(payload.iat.value.timeIntervalSince1970 == now.timeIntervalSince1970.rounded(.down))
            #expect(payload.exp.value.timeIntervalSince1970 == now.timeIntervalSince1970.rounded(.down) + 3600)
            #expect(payload.nonce == "n-1")
            #expect(payload.email == "a@example.com")
            #expect(payload.email_verified == true)
            #expect(payload.tid == nil)

            // Forged tokens of the same algorithm do not verify.
            for forgery in [TokenForgery.badSignature, .unpublishedKey, .algNone, .hs256WithPublicKey] {
                let forged = try yahoo.mintIDToken(
                    base: base, subject: "u-1", audience: "client-1", algorithm: algorithm, forgery: forgery)
                await #expect(throws: (any Error).self, "\(forgery)") { try await keys.verify(forged, as: IDToken.self) }
            }
        }
    }

    @Test func claimsAreEasyToOverride() async throws {
        let line = try MockOIDCIssuer(name: "line", algorithms: [.es256])
        let base = "http://127.0.0.1:1"
        let claims = line.claims(
            base: base, subject: "s", audience: "a", email: "e@example.com", emailVerified: nil, issuer: "https://other.example",
            lifetime: -60, extra: ["aud": .array([.string("a"), .string("b")]), "amr": .array([.string("pwd")])])
        #expect(claims["iss"] == .string("https://other.example"))
        #expect(claims["aud"] == .array([.string("a"), .string("b")]))
        #expect(claims["email_verified"] == nil)
        guard case .int(let iat) = claims["iat"], case .int(let exp) = claims["exp"] else {
            Issue.record("iat and exp are numbers")
            return
        }
        #expect(exp == iat - 60)
        // With only an ES256 key, tokens default to it; an RSA algorithm has no key.
        #expect(try Self.header(line.mint(claims)).alg == "ES256")
        #expect(throws: MockOIDCError.noKey("RS256")) { try line.mint(claims, algorithm: .rs256) }
        let kid = try #require(line.currentKeyID(.es256))
        #expect(throws: MockOIDCError.keyCannotSign(kid: kid, "PS256")) { try line.mint(claims, algorithm: .ps256, kid: kid) }
        // The header can lie.
        let lying = try line.mint(claims, header: ["kid": .string("other"), "alg": .string("RS256")])
        #expect(try Self.header(lying).kid == "other")
        #expect(try Self.header(lying).alg == "RS256")
        #expect(throws: MockOIDCError.invalidName("a/b")) { try MockOIDCIssuer(name: "a/b") }
    }

    @Test func rotationPublishesANewKidThatAStaleKeySetDoesNotKnow() async throws {
        let line = try MockOIDCIssuer(name: "line")
        try await Self.withServer([line]) { base in
            let stale = try await Self.keys(at: line.jwksURL(base: base))
            let oldKid = try #require(line.currentKeyID(.rs256))
            let newKid = try line.rotate(.rs256)
            #expect(newKid != oldKid)
            #expect(line.currentKeyID(.rs256) == newKid)
            #expect(line.publishedKeyIDs.contains(oldKid) && line.publishedKeyIDs.contains(newKid))

            let token = try line.mintIDToken(base: base, subject: "u", audience: "c")
            #expect(try Self.header(token).kid == newKid)
            await #expect(throws: (any Error).self) { try await stale.verify(token, as: IDToken.self) }
            // Fetching the key set again (what an unknown kid should make a verifier do) finds it.
            let fresh = try await Self.keys(at: line.jwksURL(base: base))
            #expect(try await fresh.verify(token, as: IDToken.self).sub.value == "u")

            // keepOld false retires the earlier RSA keys; the ES256 key stays.
            let esKid = try #require(line.currentKeyID(.es256))
            let newest = try line.rotate(.rs256, keepOld: false)
            #expect(Set(line.publishedKeyIDs) == [esKid, newest])
            // An unpublished key signs but is served only once published.
            let hidden = try line.rotate(.es256, publish: false)
            #expect(try Self.header(line.mintIDToken(base: base, subject: "u", audience: "c", algorithm: .es256)).kid == hidden)
            var served = try #require(try await Self.get(line.jwksURL(base: base)).json()["keys"] as? [[String: String]])
            #expect(!served.contains { $0["kid"] == hidden })
            line.publish(kid: hidden)
            served = try #require(try await Self.get(line.jwksURL(base: base)).json()["keys"] as? [[String: String]])
            #expect(served.contains { $0["kid"] == hidden })
        }
    }

    @Test func multiTenantIssuersFollowEntrasShape() async throws {
        let entra = try MockOIDCIssuer(name: "entra", multiTenant: true)
        try await Self.withServer([entra]) { base in
            let tenant = "3c9a1f52-7d4e-4b8a-9f60-1e2d3c4b5a69"
            #expect(entra.issuer(base: base) == base + "/oidc/entra/{tid}/v2.0")
            #expect(entra.discoveryURL(base: base) == base + "/oidc/entra/common/v2.0/.well-known/openid-configuration")

            let common = try await Self.get(entra.discoveryURL(base: base)).json()
            #expect(common["issuer"] as? String == base + "/oidc/entra/{tenantid}/v2.0")
            let jwksURI = try #require(common["jwks_uri"] as? String)
            #expect(jwksURI == base + "/oidc/entra/common/discovery/v2.0/keys")
            #expect(jwksURI == entra.jwksURL(base: base))

            let ownDiscovery = try await Self.get(entra.discoveryURL(base: base, tenant: tenant)).json()
            #expect(ownDiscovery["issuer"] as? String == base + "/oidc/entra/\(tenant)/v2.0")

            let keys = try await Self.keys(at: jwksURI)
            for algorithm in [MockOIDCIssuer.Algorithm.rs256, .es256] {
                let token = try entra.mintIDToken(base: base, subject: "s", audience: "app", tenant: tenant, algorithm: algorithm)
                let payload = try await keys.verify(token, as: IDToken.self)
                #expect(payload.tid == tenant)
                #expect(payload.iss.value == entra.issuer(base: base).replacingOccurrences(of: "{tid}", with: tenant))
                #expect(payload.iss.value == ownDiscovery["issuer"] as? String)
                let placeholder = try #require(common["issuer"] as? String)
                #expect(payload.iss.value == placeholder.replacingOccurrences(of: "{tenantid}", with: tenant))
            }
            // No tenant given: the default tenant's.
            let token = try entra.mintIDToken(base: base, subject: "s", audience: "app")
            #expect(try await keys.verify(token, as: IDToken.self).tid == MockOIDCIssuer.defaultTenant)
        }
    }

    @Test func faultsAnswerAsTold() async throws {
        let line = try MockOIDCIssuer(name: "line")
        try await Self.withServer([line]) { base in
            let (discovery, keys) = (line.discoveryURL(base: base), line.jwksURL(base: base))
            line.discoveryFault = .unavailable
            #expect(try await Self.get(discovery).status == 503)
            line.discoveryFault = .wrongIssuer
            let wrong = try await Self.get(discovery)
            #expect(wrong.status == 200)
            #expect(try wrong.json()["issuer"] as? String == "http://wrong-issuer.invalid/oidc/line")
            #expect(try wrong.json()["jwks_uri"] as? String == keys)
            line.discoveryFault = .malformed
            let malformed = try await Self.get(discovery)
            #expect(malformed.status == 200)
            #expect(throws: (any Error).self) { try JSONSerialization.jsonObject(with: malformed.body) }
            line.discoveryFault = .answer(status: 404, body: Data("{}".utf8))
            #expect(try await Self.get(discovery).status == 404)
            line.discoveryFault = .none
            #expect(try await Self.get(discovery).json()["issuer"] as? String == line.issuer(base: base))

            line.keysFault = .unavailable
            #expect(try await Self.get(keys).status == 503)
            line.keysFault = .emptySet
            #expect((try await Self.get(keys).json()["keys"] as? [Any])?.isEmpty == true)
            line.keysFault = .none
            #expect(try await Self.get(keys).status == 200)
            #expect(line.discoveryFetches == 5)
            #expect(line.keyFetches == 3)
        }
    }

    @Test func faultsAreSetThroughTheFaultRoute() async throws {
        let line = try MockOIDCIssuer(name: "line")
        let entra = try MockOIDCIssuer(name: "entra", multiTenant: true)
        try await Self.withServer([line, entra]) { base in
            let answer = try await Self.post(
                base + MockIdPServer.faultsPath, json: #"{"oidc.line.discovery": "wrong_issuer", "oidc.entra.keys": "unavailable"}"#)
            #expect(answer.status == 200)
            let current = try answer.json()
            #expect(current["oidc.line.discovery"] as? String == "wrong_issuer")
            #expect(current["oidc.entra.keys"] as? String == "unavailable")
            #expect(current["oidc.line.keys"] as? String == "none")
            #expect(line.discoveryFault == .wrongIssuer)
            #expect(try await Self.get(entra.jwksURL(base: base)).status == 503)
            for wrong in [#"{"oidc.line.keys": "wrong_issuer"}"#, #"{"oidc.yahoo.keys": "hang"}"#, #"{"oidc.line": "hang"}"#] {
                #expect(try await Self.post(base + MockIdPServer.faultsPath, json: wrong).status == 400, "\(wrong)")
            }
            #expect(try await Self.post(base + MockIdPServer.faultsPath, json: #"{"oidc.line.keys": "hang"}"#).status == 200)
            #expect(line.keysFault == .hang)
        }
    }

    @Test func hangingDiscoveryAndKeysAreSeenAsAClientTimeout() async throws {
        let line = try MockOIDCIssuer(name: "line")
        let entra = try MockOIDCIssuer(name: "entra", multiTenant: true)
        try await Self.withServer([line, entra]) { base in
            line.discoveryFault = .hang
            entra.keysFault = .hang
            for url in [line.discoveryURL(base: base), entra.jwksURL(base: base)] {
                let started = ContinuousClock.now
                await #expect(throws: HTTPClientError.deadlineExceeded, "\(url)") {
                    _ = try await Self.get(url, timeout: .milliseconds(300))
                }
                #expect(ContinuousClock.now - started < .seconds(5))
            }
            // Each request was counted at most once. (Exactly once only on a machine that sent it
            // within the 300 ms: under the whole suite's load the client can give up before its
            // request leaves, so the count is no event to wait on.)
            #expect(line.discoveryFetches <= 1)
            #expect(entra.keyFetches <= 1)
            // The other endpoints still answer.
            let keys = try await Self.get(line.jwksURL(base: base))
            let discovery = try await Self.get(entra.discoveryURL(base: base))
            #expect(keys.status == 200)
            #expect(discovery.status == 200)
        }
    }

    @Test func liftingAHangAnswersTheWaitingRequest() async throws {
        let line = try MockOIDCIssuer(name: "line")
        try await Self.withServer([line]) { base in
            line.keysFault = .hang
            async let answer = Self.get(line.jwksURL(base: base), timeout: .seconds(30))
            await line.waitUntilHanging(1)
            #expect(line.hangingRequests == 1)
            line.keysFault = .none
            let keys = try await answer
            #expect(keys.status == 200)
            #expect(line.keyFetches == 1)
            #expect(line.hangingRequests == 0)
        }
    }

    @Test func aHangingRequestDoesNotHoldUpTheServersEnd() async throws {
        let line = try MockOIDCIssuer(name: "line")
        line.discoveryFault = .hang
        // Ended by graceful shutdown, as `mock-idp` is on SIGTERM, with no bound on it: the
        // server ends (the suite's time limit would catch it holding on) before `with` returns,
        // and the client gets no answer.
        let client = try await ServedApplication.with(
            gracefulShutdownLimit: nil,
            { listening in
                MockIdPServer.application(apple: nil, google: nil, facebook: nil, oidc: [line], port: 0) { port in listening(port) }
            }
        ) { port in
            let client = Task { try await Self.get(line.discoveryURL(base: "http://127.0.0.1:\(port)"), timeout: .seconds(50)) }
            await line.waitUntilHanging(1)
            return client
        }
        await #expect(throws: (any Error).self) { try await client.value }
        #expect(line.hangingRequests == 0)
    }
}

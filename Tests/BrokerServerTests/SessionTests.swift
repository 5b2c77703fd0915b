import BrokerCore
import BrokerApplication
import BrokerServer
import Foundation
import HTTPTypes
import HummingbirdTesting
import MockIdP
import NIOCore
import Storage
import TestSupport
import PostgresNIO
import Testing

@Suite struct SessionTests {
    func signIn(_ setup: AppleTestSetup, subject: String = "person") async throws -> (access: String, refresh: String, account: String) {
        let body = try await setup.signIn(["client_id": "com.acme.app", "identity_token": try setup.token(subject: subject)])
        return (
            try #require(body[path: "session.access_token"] as? String), try #require(body[path: "session.refresh_token"] as? String),
            try #require(body[path: "account.id"] as? String)
        )
    }

    func refresh(_ setup: AppleTestSetup, _ token: String) async throws -> TestResponse {
        try await setup.post("/v1/sessions/refresh", json: ["refresh_token": token])
    }

    func introspect(_ setup: AppleTestSetup, _ token: String, key: String? = nil) async throws -> [String: Any] {
        let response = try await setup.postForm("/v1/sessions/introspect", "token=\(token)", key: key)
        #expect(response.status == .ok)
        #expect(response.headers[.cacheControl] == "no-store")
        return try response.json()
    }

    @Test func refreshRotatesAndReuseRevokesTheFamily() async throws {
        try await AppleTestSetup.run { setup in
            let first = try await signIn(setup)
            let rotated = try await refresh(setup, first.refresh)
            #expect(rotated.status == .ok)
            let body = try rotated.json()
            let second = try #require(body["refresh_token"] as? String)
            #expect(second != first.refresh)
            #expect(body["token_type"] as? String == "Bearer" && body["expires_in"] as? Int == 900)
            #expect((body["access_token"] as? String)?.split(separator: ".").count == 3)

            // Form-encoded works too (RFC 6749 clients).
            let third = try await setup.postForm("/v1/sessions/refresh", "grant_type=refresh_token&refresh_token=\(second)")
            #expect(third.status == .ok)
            let thirdToken = try #require(try third.json()["refresh_token"] as? String)

            // Replaying an already-rotated token after the reuse interval (aged here):
            // invalid_grant, and the family is gone.
            try await setup.ageSpentRefreshTokens(by: 60)
            let replay = try await refresh(setup, first.refresh)
            #expect(replay.status == .badRequest)
            #expect(replay.problemCode == "invalid_grant")
            let afterReplay = try await refresh(setup, thirdToken)
            #expect(afterReplay.problemCode == "invalid_grant", "the newest token of the family was revoked too")
            #expect(try await introspect(setup, first.access)["active"] as? Bool == false)
        }
    }

    @Test func introspectionAcceptsOnlyTheCanonicalSpellingOfAnAccessToken() async throws {
        try await AppleTestSetup.run { setup in
            let session = try await signIn(setup)
            #expect(try await introspect(setup, session.access)["active"] as? Bool == true)
            let parts = session.access.split(separator: ".").map(String.init)
            var spellings: [String] = []
            for index in 0..<3 where parts[index].count % 4 != 0 {
                var padded = parts
                padded[index] += String(repeating: "=", count: 4 - parts[index].count % 4)
                spellings.append(padded.joined(separator: "."))
            }
            for index in 0..<3 where parts[index].contains(where: { $0 == "-" || $0 == "_" }) {
                var standard = parts
                standard[index] = standard[index].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
                spellings.append(standard.joined(separator: "."))
            }
            #expect(!spellings.isEmpty)
            for spelling in spellings {
                let encoded = spelling.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(.init(charactersIn: "._-"))) ?? ""
                let response = try await setup.postForm("/v1/sessions/introspect", "token=\(encoded)")
                #expect(try response.json()["active"] as? Bool == false, "\(spelling.suffix(12))")
            }
        }
    }

    @Test func aRetriedRefreshGetsTheSameSuccessorAndKeepsTheSession() async throws {
        try await AppleTestSetup.run { setup in
            let session = try await signIn(setup)
            let first = try await refresh(setup, session.refresh)
            #expect(first.status == .ok)
            #expect(first.headers[.cacheControl] == "no-store")
            let successor = try #require(try first.json()["refresh_token"] as? String)
            // The client never saw the answer and retries within the reuse interval.
            let retried = try await refresh(setup, session.refresh)
            #expect(retried.status == .ok)
            let retriedBody = try retried.json()
            #expect(retriedBody["refresh_token"] as? String == successor, "the same successor again")
            let access = try #require(retriedBody["access_token"] as? String)
            #expect(try await introspect(setup, access)["active"] as? Bool == true)
            #expect(try await introspect(setup, successor)["active"] as? Bool == true)
            // The family goes on: the successor rotates as usual.
            let next = try await refresh(setup, successor)
            #expect(next.status == .ok)
            #expect(try await introspect(setup, session.access)["active"] as? Bool == true)
            #expect(try await setup.liveSessionCount() == 1)
        }
    }

    @Test func aRetryAfterTheSuccessorMovedOnIsRefusedWithoutEndingTheSession() async throws {
        try await AppleTestSetup.run { setup in
            let session = try await signIn(setup)
            let successor = try #require(try await refresh(setup, session.refresh).json()["refresh_token"] as? String)
            let newest = try #require(try await refresh(setup, successor).json()["refresh_token"] as? String)
            // The first token again, still within the reuse interval, but its successor is spent:
            // it yields nothing and ends nothing.
            let late = try await refresh(setup, session.refresh)
            #expect(late.problemCode == "invalid_grant")
            #expect(try await introspect(setup, newest)["active"] as? Bool == true)
            #expect(try await refresh(setup, newest).status == .ok)
        }
    }

    @Test func concurrentRefreshesOfOneTokenAllGetTheSameSuccessor() async throws {
        try await AppleTestSetup.run { setup in
            let session = try await signIn(setup)
            let answers = try await withThrowingTaskGroup(of: (Int, String?).self, returning: [(Int, String?)].self) { group in
                for _ in 0..<6 {
                    group.addTask {
                        let response = try await refresh(setup, session.refresh)
                        return (response.status.code, try? response.json()["refresh_token"] as? String)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.allSatisfy { $0.0 == 200 }, "\(answers.map(\.0))")
            let successors = Set(answers.compactMap(\.1))
            #expect(successors.count == 1, "every caller gets the same successor")
            let successor = try #require(successors.first)
            #expect(try await introspect(setup, successor)["active"] as? Bool == true)
            #expect(try await refresh(setup, successor).status == .ok, "the family stays")
            #expect(try await setup.liveSessionCount() == 1)
        }
    }

    @Test func unknownAndMalformedRefreshTokensAreInvalidGrant() async throws {
        try await AppleTestSetup.run { setup in
            for token in [RefreshToken.generate(sessionID: UUID()).value, "nonsense", ""] {
                let response = try await refresh(setup, token)
                #expect(response.status == .badRequest)
                #expect(response.problemCode == "invalid_grant" || response.problemCode == "invalid_request")
            }
        }
    }

    @Test func introspectionOfAccessAndRefreshTokens() async throws {
        try await AppleTestSetup.run { setup in
            let session = try await signIn(setup)
            let access = try await introspect(setup, session.access)
            #expect(access["active"] as? Bool == true)
            #expect(access["sub"] as? String == session.account)
            #expect(access["token_type"] as? String == "access_token")
            #expect(access["iss"] as? String == "\(TestApp.publicURL)/t/acme")
            #expect(access["aud"] as? [String] == ["acme"])
            #expect(access["client_id"] as? String == "com.acme.app")
            #expect(access["idp"] as? String == "apple")
            #expect(access["sid"] is String && access["exp"] is Int && access["iat"] is Int)

            let refresh = try await introspect(setup, session.refresh)
            #expect(refresh["active"] as? Bool == true)
            #expect(refresh["token_type"] as? String == "refresh_token")
            #expect(refresh["sid"] as? String == access["sid"] as? String)

            // JSON bodies are accepted as well.
            let json = try await setup.post("/v1/sessions/introspect", json: ["token": session.access])
            #expect(try json.json()["active"] as? Bool == true)

            for junk in ["", "abc", "a.b.c", RefreshToken.generate(sessionID: UUID()).value] {
                #expect(try await introspect(setup, junk)["active"] as? Bool == false)
            }
        }
    }

    @Test func anotherTenantsTokensAreInactive() async throws {
        try await AppleTestSetup.run { setup in
            let session = try await signIn(setup)
            _ = try await setup.app.createTenant("globex")
            let globexKey = try await setup.app.createKey("globex")
            #expect(try await introspect(setup, session.access, key: globexKey)["active"] as? Bool == false)
            #expect(try await introspect(setup, session.refresh, key: globexKey)["active"] as? Bool == false)
            // Nor can globex refresh or revoke them.
            let stolen = try await setup.post("/v1/sessions/refresh", json: ["refresh_token": session.refresh], key: globexKey)
            #expect(stolen.problemCode == "invalid_grant")
            _ = try await setup.postForm("/v1/sessions/revoke", "token=\(session.refresh)", key: globexKey)
            #expect(try await introspect(setup, session.refresh)["active"] as? Bool == true)
        }
    }

    @Test func revokingARefreshTokenEndsItsFamily() async throws {
        try await AppleTestSetup.run { setup in
            let session = try await signIn(setup)
            let revoked = try await setup.postForm(
                "/v1/sessions/revoke", "token=\(session.refresh)&token_type_hint=refresh_token")
            #expect(revoked.status == .ok)
            #expect(try await introspect(setup, session.refresh)["active"] as? Bool == false)
            #expect(try await introspect(setup, session.access)["active"] as? Bool == false)
            // RFC 7009: invalid tokens are fine too.
            #expect(try await setup.postForm("/v1/sessions/revoke", "token=whatever").status == .ok)
        }
    }

    @Test func aSpentRefreshTokenIsInactiveAndRevokingItStillEndsItsFamily() async throws {
        try await AppleTestSetup.run { setup in
            let session = try await signIn(setup)
            let rotated = try await refresh(setup, session.refresh)
            let successor = try #require(try rotated.json()["refresh_token"] as? String)
            #expect(try await introspect(setup, session.refresh)["active"] as? Bool == false)
            #expect(try await introspect(setup, successor)["active"] as? Bool == true)
            // A client revoking the token it held before rotation (RFC 7009) ends the session.
            let revoked = try await setup.postForm("/v1/sessions/revoke", "token=\(session.refresh)")
            #expect(revoked.status == .ok)
            #expect(try await introspect(setup, successor)["active"] as? Bool == false)
            #expect(try await refresh(setup, successor).problemCode == "invalid_grant")
        }
    }

    @Test func revokingAnAccessTokenEndsItsSession() async throws {
        try await AppleTestSetup.run { setup in
            let session = try await signIn(setup)
            let revoked = try await setup.post("/v1/sessions/revoke", json: ["token": session.access])
            #expect(revoked.status == .ok)
            #expect(try await introspect(setup, session.access)["active"] as? Bool == false)
            #expect(try await refresh(setup, session.refresh).problemCode == "invalid_grant")
        }
    }

    @Test func signOutEndsEverySessionOfTheAccount() async throws {
        try await AppleTestSetup.run { setup in
            let one = try await signIn(setup)
            let two = try await signIn(setup)
            let other = try await signIn(setup, subject: "someone-else")
            let response = try await setup.post("/v1/accounts/\(one.account)/sign-out", json: [:])
            #expect(response.status == .ok)
            #expect(try response.json()["revoked_sessions"] as? Int == 2)
            #expect(try await introspect(setup, one.refresh)["active"] as? Bool == false)
            #expect(try await introspect(setup, two.access)["active"] as? Bool == false)
            #expect(try await introspect(setup, other.refresh)["active"] as? Bool == true)
            let missing = try await setup.post("/v1/accounts/\(UUID().uuidString)/sign-out", json: [:])
            #expect(missing.problemCode == "account_not_found")
        }
    }

    @Test func accountWithIdentitiesWithoutSecrets() async throws {
        try await AppleTestSetup.run { setup in
            let code = setup.apple.issueCode(clientID: "com.acme.app", subject: "person")
            let body = try await setup.signIn([
                "client_id": "com.acme.app", "identity_token": try setup.token(subject: "person"), "authorization_code": code,
            ])
            let id = try #require(body[path: "account.id"] as? String)
            let response = try await setup.client.execute(uri: "/v1/accounts/\(id)", method: .get, headers: bearer(setup.apiKey))
            #expect(response.status == .ok)
            let account = try response.json()
            #expect(account[path: "account.id"] as? String == id)
            let identities = try #require(account["identities"] as? [[String: Any]])
            #expect(identities.count == 1)
            #expect(identities[0]["subject"] as? String == "person")
            #expect(identities[0]["has_provider_refresh_token"] as? Bool == true)
            #expect(!String(buffer: response.body).contains("\"refresh_token\""))
            // No name was ever given: the member is there, null (the contract's `{...} | null`),
            // here and in the sign-in response.
            #expect(account[path: "account"].flatMap { ($0 as? [String: Any])?["name"] } is NSNull)
            #expect(body[path: "account"].flatMap { ($0 as? [String: Any])?["name"] } is NSNull)
            let other = try await setup.client.execute(
                uri: "/v1/accounts/\(UUID().uuidString)", method: .get, headers: bearer(setup.apiKey))
            #expect(other.status == .notFound)
        }
    }

    @Test func scopesAreEnforcedOnSessionAndAccountRoutes() async throws {
        try await AppleTestSetup.run { setup in
            let session = try await signIn(setup)
            let (_, tenantOnly) = try await APIKeyAdmin(database: setup.app.database, actor: "test").create(
                tenant: "acme", name: "t", scopes: ["tenant"])
            let refresh = try await setup.post("/v1/sessions/refresh", json: ["refresh_token": session.refresh], key: tenantOnly)
            #expect(refresh.problemCode == "insufficient_scope")
            let account = try await setup.client.execute(
                uri: "/v1/accounts/\(session.account)", method: .get, headers: bearer(tenantOnly))
            #expect(account.problemCode == "insufficient_scope")
        }
    }

    /// A stock JOSE library (Python's joserfc) verifies the access token from the tenant's JWKS
    /// alone, with no broker code.
    @Test func accessTokensVerifyWithAStockLibraryFromTheJWKS() async throws {
        try await AppleTestSetup.run { setup in
            let session = try await signIn(setup)
            let jwks = try await setup.client.execute(uri: "/t/acme/.well-known/jwks.json", method: .get) {
                String(buffer: $0.body)
            }
            let script = """
                import json, sys
                from joserfc import jwt
                from joserfc.jwk import KeySet
                keys = KeySet.import_key_set(json.loads(sys.argv[1]))
                token = jwt.decode(sys.argv[2], keys, algorithms=["ES256"])
                jwt.JWTClaimsRegistry(iss={"essential": True, "value": sys.argv[3]}, aud={"essential": True, "value": "acme"}).validate(token.claims)
                print(json.dumps({"sub": token.claims["sub"], "alg": token.header["alg"], "kid": token.header["kid"]}))
                """
            let arguments = ["python3", "-c", script, jwks, session.access, "\(TestApp.publicURL)/t/acme"]
            let result = try await onOwnThread { try ProcessRunner.run("/usr/bin/env", arguments) }
            #expect(result.status == 0, "\(result.output)")
            #expect(result.output.contains("\"sub\": \"\(session.account)\""))
            #expect(result.output.contains("\"alg\": \"ES256\""))
        }
    }

    /// Refresh tokens name their session (decision 0027); tokens issued before, in the old
    /// shape and on sessions migration 0010 marked, keep working until their families end.
    @Test func refreshTokensNameTheirSessionAndOldOnesStillWork() async throws {
        try await AppleTestSetup.run { setup in
            let first = try await signIn(setup, subject: "named")
            let named = try #require(RefreshToken(parsing: first.refresh))
            #expect(first.refresh.utf8.count == 68)
            let sid = try #require(try jwtClaims(first.access)["sid"] as? String)
            #expect(named.sessionID?.lowercasedString == sid)
            let rotated = try #require(try await refresh(setup, first.refresh).json()["refresh_token"] as? String)
            #expect(RefreshToken(parsing: rotated)?.sessionID == named.sessionID)

            // A session as migration 0010 found it: a token of the old shape, found by its hash.
            let old = try await signIn(setup, subject: "old-shape")
            let oldSession = try #require(RefreshToken(parsing: old.refresh)?.sessionID)
            let legacy = try #require(RefreshToken(parsing: "ibr_" + Base64URL.encode(SecureRandom.bytes(32))))
            try await setup.app.database.client.query(
                "UPDATE sessions SET refresh_token_hash = \(legacy.hash), refresh_token_legacy = true WHERE id = \(oldSession)")
            #expect(try await introspect(setup, legacy.value)["active"] as? Bool == true)
            let successor = try #require(try await refresh(setup, legacy.value).json()["refresh_token"] as? String)
            #expect(successor.utf8.count == 47, "the successor of an old token keeps the old shape")
            #expect(try await introspect(setup, successor)["active"] as? Bool == true)
            // A retry within the reuse interval gets the same successor; the next one rotates.
            #expect(try await refresh(setup, legacy.value).json()["refresh_token"] as? String == successor)
            #expect(try await refresh(setup, successor).status == .ok)
            // Revocation by the spent old token ends the family.
            _ = try await setup.postForm("/v1/sessions/revoke", "token=\(legacy.value)")
            #expect(try await setup.app.database.sessions.liveSession(tenantID: setup.tenant.id, sessionID: oldSession) == nil)
            // The named session is untouched.
            #expect(try await introspect(setup, rotated)["active"] as? Bool == true)
        }
    }

    /// A token that names a session of the tenant but is not its token finds nothing.
    @Test func aTokenNamingAnotherSessionIsInvalid() async throws {
        try await AppleTestSetup.run { setup in
            let victim = try await signIn(setup, subject: "victim")
            let session = try #require(RefreshToken(parsing: victim.refresh)?.sessionID)
            let forged = RefreshToken.generate(sessionID: session)
            #expect(try await refresh(setup, forged.value).status == .badRequest)
            #expect(try await introspect(setup, forged.value)["active"] as? Bool == false)
            _ = try await setup.postForm("/v1/sessions/revoke", "token=\(forged.value)")
            #expect(try await introspect(setup, victim.refresh)["active"] as? Bool == true)
        }
    }
}

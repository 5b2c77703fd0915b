import BrokerCore
import BrokerApplication
import BrokerServer
import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import Storage
import TestSupport
import Testing

@Suite struct DiscoveryTests {
    func jwks(_ client: any TestClientProtocol, _ slug: String) async throws -> [[String: String]] {
        try await client.execute(uri: "/t/\(slug)/.well-known/jwks.json", method: .get) { response in
            #expect(response.status == .ok)
            #expect(response.headers[.cacheControl] == "public, max-age=300")
            return try #require(try response.json()["keys"] as? [[String: String]])
        }
    }

    @Test func jwksPublishesTheActiveKeyInStandardForm() async throws {
        try await TestApp.run { app, client in
            let tenant = try await app.createTenant("acme")
            let keys = try await jwks(client, "acme")
            #expect(keys.count == 1)
            let jwk = keys[0]
            #expect(jwk["kty"] == "EC" && jwk["crv"] == "P-256" && jwk["alg"] == "ES256" && jwk["use"] == "sig")
            #expect(jwk["d"] == nil)

            // The published x/y are the public half of the stored (sealed) private key:
            // sign with the private key, verify with a key rebuilt from the JWK alone.
            let record = try #require(try await app.database.signingKeys.list(tenantID: tenant.id).first)
            #expect(jwk["kid"] == record.kid)
            let raw = try app.secrets.open(
                record.sealedPrivateKey, context: SigningKeyRecord.sealingContext(tenantID: tenant.id, kid: record.kid),
                what: "signing key")
            let privateKey = try P256.Signing.PrivateKey(rawRepresentation: raw)
            let x = try #require(Base64URL.decode(jwk["x"] ?? "")), y = try #require(Base64URL.decode(jwk["y"] ?? ""))
            let publicKey = try P256.Signing.PublicKey(rawRepresentation: x + y)
            let message = Data("broker".utf8)
            #expect(publicKey.isValidSignature(try privateKey.signature(for: message), for: message))
        }
    }

    @Test func rotationPublishesTheNextKeyBeforeItSigns() async throws {
        try await TestApp.run { app, client in
            let tenant = try await app.createTenant("acme")
            let first = try #require(try await app.keys.list(tenant: "acme").first)
            #expect(first.state == .active)

            // A whole second (rounded up, so the first key is active by then): PostgreSQL keeps
            // microseconds, and a time read back from it can land a floating-point step past a
            // `Date()` with more digits (seen once in CI: the next key not yet active at exactly
            // `now + 600`).
            let now = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.up))
            let next = try await app.keys.rotate(tenant: "acme", now: now)
            #expect(next.state == .next)
            #expect(next.record.activatesAt == now.addingTimeInterval(600))

            // Published at once...
            #expect(Set(try await jwks(client, "acme").compactMap { $0["kid"] }) == [first.record.kid, next.record.kid])
            // ...but the old key still signs until the delay has passed.
            let ring = SigningKeyRing(try await app.database.signingKeys.list(tenantID: tenant.id))
            #expect(ring.active(at: now.addingTimeInterval(599))?.kid == first.record.kid)
            #expect(ring.active(at: now.addingTimeInterval(600))?.kid == next.record.kid)
            // After the switch the old key stays published (tokens it signed still verify).
            #expect(ring.published(at: now.addingTimeInterval(3_600)).count == 2)
        }
    }

    @Test func retiringTheActiveKeyPromotesNextAndTheLastKeyCannotBeRetired() async throws {
        try await TestApp.run { app, _ in
            _ = try await app.createTenant("acme")
            let first = try #require(try await app.keys.list(tenant: "acme").first)
            await #expect(throws: BrokerError.self) { try await app.keys.retire(tenant: "acme", kid: first.record.kid) }

            let next = try await app.keys.rotate(tenant: "acme")
            let after = try await app.keys.retire(tenant: "acme", kid: first.record.kid)
            let states = Dictionary(uniqueKeysWithValues: after.map { ($0.record.kid, $0.state) })
            #expect(states == [first.record.kid: .retired, next.record.kid: .active])
            await #expect(throws: BrokerError.self) { try await app.keys.retire(tenant: "acme", kid: "no-such-kid") }
        }
    }

    @Test func issuerMetadataNamesTheTenantEndpoints() async throws {
        try await TestApp.run { app, client in
            _ = try await app.createTenant("acme")
            try await client.execute(uri: "/t/acme/.well-known/openid-configuration", method: .get) { response in
                #expect(response.status == .ok)
                let metadata = try response.json()
                let issuer = "\(TestApp.publicURL)/t/acme"
                #expect(metadata["issuer"] as? String == issuer)
                #expect(metadata["jwks_uri"] as? String == "\(issuer)/.well-known/jwks.json")
                #expect(metadata["introspection_endpoint"] as? String == "\(TestApp.publicURL)/v1/sessions/introspect")
                #expect(metadata["revocation_endpoint"] as? String == "\(TestApp.publicURL)/v1/sessions/revoke")
                #expect(metadata["id_token_signing_alg_values_supported"] as? [String] == ["ES256"])
                // The tenant's OpenID Provider (issue 42 §2).
                #expect(metadata["authorization_endpoint"] as? String == "\(issuer)/authorize")
                #expect(metadata["token_endpoint"] as? String == "\(issuer)/token")
                #expect(metadata["userinfo_endpoint"] as? String == "\(issuer)/userinfo")
                #expect(metadata["end_session_endpoint"] as? String == "\(issuer)/logout")
                #expect(metadata["response_types_supported"] as? [String] == ["code"])
                #expect(
                    metadata["grant_types_supported"] as? [String] == [
                        "authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:token-exchange",
                    ])
                #expect(metadata["code_challenge_methods_supported"] as? [String] == ["S256"])
                #expect(
                    metadata["token_endpoint_auth_methods_supported"] as? [String] == ["client_secret_basic", "client_secret_post", "none"])
                #expect(metadata["scopes_supported"] as? [String] == ["openid", "email", "profile", "offline_access"])
                #expect(Set(metadata["claims_supported"] as? [String] ?? []).isSuperset(of: ["sub", "email", "name", "idp", "at_hash"]))
                #expect(metadata["authorization_response_iss_parameter_supported"] as? Bool == true)
            }
        }
    }

    @Test func unknownTenantsAre404Problems() async throws {
        try await TestApp.run { _, client in
            for path in ["/t/nobody/.well-known/jwks.json", "/t/nobody/.well-known/openid-configuration"] {
                try await client.execute(uri: path, method: .get) { response in
                    #expect(response.status == .notFound)
                    #expect(response.problemCode == "tenant_not_found")
                }
            }
        }
    }
}

import BrokerCore
import BrokerApplication
import BrokerServer
import Foundation
import HTTPTypes
import HummingbirdTesting
import Storage
import Testing

@Suite struct APIKeyAuthenticationTests {
    @Test func aValidKeyReturnsItsTenant() async throws {
        try await TestApp.run { app, client in
            _ = try await app.createTenant("acme")
            let key = try await app.createKey("acme")
            try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(key)) { response in
                #expect(response.status == .ok)
                let body = try response.json()
                #expect(body["slug"] as? String == "acme")
                #expect(body["issuer"] as? String == "\(TestApp.publicURL)/t/acme")
                let session = try #require(body["session"] as? [String: Any])
                #expect(session["access_token_ttl"] as? Int == 900)
                #expect(session["audiences"] as? [String] == ["acme"])
                let apiKey = try #require(body["api_key"] as? [String: Any])
                #expect(key.hasPrefix(apiKey["prefix"] as? String ?? "-"))
            }
        }
    }

    @Test func lowercaseBearerSchemeIsAccepted() async throws {
        try await TestApp.run { app, client in
            _ = try await app.createTenant("acme")
            let key = try await app.createKey("acme")
            for header in ["bearer \(key)", "BEARER \(key)", "Bearer   \(key) ", "Bearer \t\(key)"] {
                try await client.execute(uri: "/v1/tenant", method: .get, headers: [.authorization: header]) {
                    #expect($0.status == .ok, "\(header.prefix(9))")
                }
            }
        }
    }

    @Test func rejectionsAre401ProblemsWithStableCodes() async throws {
        try await TestApp.run { app, client in
            _ = try await app.createTenant("acme")
            let cases: [(HTTPFields, String)] = [
                ([:], "missing_api_key"),
                ([.authorization: "Basic dXNlcjpwYXNz"], "malformed_api_key"),
                ([.authorization: "Bearer not-a-key"], "malformed_api_key"),
                ([.authorization: "Bearer"], "malformed_api_key"),
                ([.authorization: "Bearer    "], "malformed_api_key"),
                ([.authorization: "Bearerx" + APIKeyToken.generate().value], "malformed_api_key"),
                ([.authorization: "Bearer " + APIKeyToken.generate().value + "é"], "malformed_api_key"),
                (bearer(APIKeyToken.generate().value), "invalid_api_key"),
            ]
            for (headers, code) in cases {
                try await client.execute(uri: "/v1/tenant", method: .get, headers: headers) { response in
                    #expect(response.status == .unauthorized, "\(code)")
                    #expect(response.headers[.contentType] == "application/problem+json")
                    #expect(response.headers[.wwwAuthenticate]?.hasPrefix("Bearer") == true)
                    #expect(response.problemCode == code)
                }
            }
        }
    }

    @Test func aRevokedKeyStopsWorkingAtOnce() async throws {
        try await TestApp.run { app, client in
            _ = try await app.createTenant("acme")
            let (record, key) = try await APIKeyAdmin(database: app.database, actor: "test").create(
                tenant: "acme", name: nil, scopes: [])
            try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(key)) { #expect($0.status == .ok) }
            _ = try await APIKeyAdmin(database: app.database, actor: "test").revoke(
                tenant: "acme", id: record.id.uuidString)
            // Every instance drops the cached key when the revocation commits (LISTEN/NOTIFY).
            let refused = try await eventually {
                try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(key)) {
                    $0.status == .unauthorized && $0.problemCode == "invalid_api_key"
                }
            }
            #expect(refused)
        }
    }

    @Test func aKeyOnlyEverSpeaksForItsOwnTenant() async throws {
        try await TestApp.run { app, client in
            _ = try await app.createTenant("acme")
            _ = try await app.createTenant("globex")
            let acmeKey = try await app.createKey("acme")
            let globexKey = try await app.createKey("globex")
            let acme = try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(acmeKey)) {
                try $0.json()["slug"] as? String
            }
            let globex = try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(globexKey)) {
                try $0.json()["slug"] as? String
            }
            #expect(acme == "acme" && globex == "globex")
            // Revoking acme's key from globex's side is impossible.
            let acmeKeys = try await APIKeyAdmin(database: app.database, actor: "test").list(tenant: "acme")
            await #expect(throws: BrokerError.self) {
                try await APIKeyAdmin(database: app.database, actor: "test").revoke(
                    tenant: "globex", id: acmeKeys[0].id.uuidString)
            }
        }
    }

    @Test func aDisabledTenantGets403() async throws {
        try await TestApp.run { app, client in
            _ = try await app.createTenant("acme")
            let key = try await app.createKey("acme")
            _ = try await TenantAdmin(database: app.database, actor: "test").setStatus("acme", .disabled)
            let forbidden = try await eventually {
                try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(key)) {
                    $0.status == .forbidden && $0.problemCode == "tenant_disabled"
                }
            }
            #expect(forbidden)
            _ = try await TenantAdmin(database: app.database, actor: "test").setStatus("acme", .active)
            let enabled = try await eventually {
                try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(key)) { $0.status == .ok }
            }
            #expect(enabled)
        }
    }
}

@Suite struct APIKeyScopeTests {
    @Test func aKeyWithoutTheTenantScopeIsRefused() async throws {
        try await TestApp.run { app, client in
            _ = try await app.createTenant("acme")
            let (_, key) = try await APIKeyAdmin(database: app.database, actor: "test").create(
                tenant: "acme", name: "sessions-only", scopes: ["sessions"])
            try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(key)) { response in
                #expect(response.status == .forbidden)
                #expect(response.problemCode == "insufficient_scope")
            }
        }
    }
}

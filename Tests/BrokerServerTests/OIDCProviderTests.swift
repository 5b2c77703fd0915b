import BrokerCore
import BrokerApplication
import BrokerServer
import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import MockIdP
import NIOCore
import Providers
import Storage
import Testing
import TestSupport

/// The problem code of the ``BrokerError`` an admin call is expected to throw ("no error" when
/// it succeeded, "unexpected: ..." for another error).
func brokerErrorCode(_ body: () async throws -> Void) async -> String {
    do {
        try await body()
        return "no error"
    } catch let error as BrokerError {
        return error.code
    } catch {
        return "unexpected: \(String(reflecting: error))"
    }
}

/// A generic OpenID Connect provider (decision 0035) end to end: `ProviderAdmin.enable(type:
/// "oidc")` with discovery against MockIdP's `line`, `yahoo` and multi-tenant `entra` issuers,
/// then `POST /v1/sign-in/{id}`, linking, login options, guideline 4.8, disabling and the
/// boundaries between providers and tenants.
// A guard against a hang, not a bound on speed: every suite runs at once, so a test here takes
// about as long as the whole run (150-160 s on two cores), whatever it takes alone (1-20 s).
@Suite(.timeLimit(.minutes(10))) struct OIDCProviderTests {
    typealias S = OIDCTestSetup

    // MARK: - Enable

    @Test func enableReadsDiscoveryAndStoresTheIssuerAndItsKeys() async throws {
        try await S.run(enableLine: false) { setup in
            let status = try await setup.enable(
                "line", issuer: setup.lineIssuer, clientIDs: [S.lineClient], extra: ["display-name": ["LINE"]])
            #expect(status.type == "oidc")
            #expect(status.enabled)
            #expect(status.clientIDs == [S.lineClient])
            #expect(status.displayName == "LINE")
            #expect(status.settings["issuer"] == .string(setup.lineIssuer))
            #expect(status.settings["jwks_uri"] == .string(setup.line.jwksURL(base: setup.base)))
            #expect(status.settings["email_trust"] == .string("never"))
            #expect(status.settings["algorithms"] == .array([.string("ES256"), .string("RS256")]))
            #expect(status.abilities == ["id_tokens", "web_authorization"])
            #expect(setup.line.discoveryFetches == 1)
            #expect(setup.line.keyFetches == 0, "keys are fetched at the first sign-in, not at enable")
            let stored = try #require(try await setup.stored("line"))
            #expect(stored.type == .oidc)
            #expect(stored.string("discovered_jwks_uri") == setup.line.jwksURL(base: setup.base))
            let shown = try await setup.admin.show(
                tenant: "acme", provider: try #require(ProviderID(rawValue: "line")), registry: setup.registry)
            #expect(shown.settings["issuer"] == .string(setup.lineIssuer))
            let listed = try await setup.admin.list(tenant: "acme", registry: setup.registry).map(\.provider)
            #expect(listed == ["apple", "google", "facebook", "line"])
        }
    }

    @Test func anIssuerMismatchAtEnableStoresNothing() async throws {
        try await S.run(enableLine: false) { setup in
            setup.line.discoveryFault = .wrongIssuer
            let code = await brokerErrorCode { try await setup.enable("line", issuer: setup.lineIssuer, clientIDs: [S.lineClient]) }
            #expect(code == "issuer_mismatch")
            #expect(setup.line.discoveryFetches == 1)
            let stored = try await setup.stored("line")
            #expect(stored == nil)
            // Discovery down: nothing stored either.
            setup.line.discoveryFault = .unavailable
            let down = await brokerErrorCode { try await setup.enable("line", issuer: setup.lineIssuer, clientIDs: [S.lineClient]) }
            #expect(down == "discovery_failed")
            #expect(try await setup.stored("line") == nil)
            #expect(try await setup.count("provider_configs") == 0)
        }
    }

    @Test func twoProvidersOfOneTenantCannotShareAnIssuer() async throws {
        try await S.run { setup in
            let code = await brokerErrorCode { try await setup.enable("line-two", issuer: setup.lineIssuer, clientIDs: ["another"]) }
            #expect(code == "issuer_in_use")
            #expect(try await setup.stored("line-two") == nil)
            // Another tenant may use the same issuer.
            try await setup.enable("line", issuer: setup.lineIssuer, clientIDs: [S.bravoLineClient], tenant: "bravo")
            #expect(try await setup.stored("line", tenant: "bravo")?.clientIDs == [S.bravoLineClient])
        }
    }

    // MARK: - Sign-in

    @Test func aFirstSignInCreatesTheAccountAndTheSecondFindsIt() async throws {
        try await S.run { setup in
            let token = try setup.token(subject: "U4af4980629", email: "taro@example.jp")
            let first = try await setup.signIn(
                "line", ["id_token": token, "client_id": S.lineClient, "name": ["given_name": "Taro", "family_name": "Yamada"]])
            #expect(first["is_new_account"] as? Bool == true)
            #expect(first[path: "identity.provider"] as? String == "line")
            #expect(first[path: "identity.provider_scope"] as? String == setup.lineIssuer)
            #expect(first[path: "identity.subject"] as? String == "U4af4980629")
            #expect(first[path: "account.email"] as? String == "taro@example.jp")
            #expect(first[path: "account.name.given_name"] as? String == "Taro")
            #expect(setup.line.keyFetches == 1)

            let again = try await setup.signIn("line", ["id_token": try setup.token(subject: "U4af4980629", algorithm: .es256)])
            #expect(again["is_new_account"] as? Bool == false)
            #expect(again[path: "account.id"] as? String == first[path: "account.id"] as? String)
            #expect(setup.line.keyFetches == 1, "the cached key set serves the second sign-in")
            // The same token again is a replay.
            let replay = try await setup.post("/v1/sign-in/line", json: ["id_token": token])
            #expect(replay.status == .unauthorized)
            #expect(replay.problemCode == "token_replayed")
            #expect(try await setup.count("accounts") == 1)
        }
    }

    @Test func tokensThatAreNotTheProvidersAreRefused() async throws {
        try await S.run { setup in
            let refusals: [(String, String)] = [
                (try setup.token(subject: "u", audience: "someone-else"), "audience_mismatch"),
                (try setup.token(subject: "u", iss: setup.yahooIssuer), "issuer_mismatch"),
                (try setup.token(subject: "u", iss: setup.lineIssuer + "/"), "issuer_mismatch"),
                (try setup.token(subject: "u", forgery: .hs256WithPublicKey), "invalid_token"),
                (try setup.token(subject: "u", forgery: .algNone), "invalid_token"),
                (try setup.token(subject: "u", header: ["alg": .string("HS256")]), "invalid_token"),
                (try setup.token(subject: "u", forgery: .badSignature), "invalid_token"),
                (try setup.token(subject: "u", forgery: .unpublishedKey), "unknown_key"),
                (try setup.token(subject: "u", lifetime: -3600), "token_expired"),
                (try setup.token(subject: "u", extra: ["azp": .string("another-client")]), "audience_mismatch"),
                // Another issuer's token, well signed by it: its key is not in line's key set.
                (try setup.token(setup.yahoo, subject: "u"), "unknown_key"),
            ]
            for (token, code) in refusals {
                let response = try await setup.post("/v1/sign-in/line", json: ["id_token": token])
                #expect(response.status == .unauthorized, "\(code): \(String(buffer: response.body))")
                #expect(response.problemCode == code)
            }
            // A client id the tenant does not have.
            let unknown = try await setup.post("/v1/sign-in/line", json: ["id_token": try setup.token(subject: "u"), "client_id": "nope"])
            #expect(unknown.problemCode == "unknown_client")
            // The nonce, when sent, must be the token's.
            let nonce = try await setup.post(
                "/v1/sign-in/line", json: ["id_token": try setup.token(subject: "u", nonce: "raw-1"), "nonce": "raw-2"])
            #expect(nonce.status == .unauthorized)
            #expect(nonce.problemCode == "nonce_mismatch")
            let missing = try await setup.post("/v1/sign-in/line", json: ["id_token": try setup.token(subject: "u"), "nonce": "raw-2"])
            #expect(missing.problemCode == "nonce_mismatch")
            #expect(try await setup.count("accounts") == 0)
            // Without --nonce-required a token without a nonce is accepted.
            _ = try await setup.signIn("line", ["id_token": try setup.token(subject: "u")])
        }
    }

    @Test func nonceRequiredRefusesASignInWithoutTheNonce() async throws {
        try await S.run(lineValues: ["nonce-required": ["true"]]) { setup in
            let token = try setup.token(subject: "u-nonce", nonce: "raw-nonce")
            let without = try await setup.post("/v1/sign-in/line", json: ["id_token": token])
            #expect(without.status == .badRequest, "\(String(buffer: without.body))")
            #expect(without.problemCode == "nonce_required")
            #expect(setup.line.keyFetches == 0, "refused before any key is fetched")
            let mismatch = try await setup.post("/v1/sign-in/line", json: ["id_token": token, "nonce": "other"])
            #expect(mismatch.problemCode == "nonce_mismatch")
            let with = try await setup.signIn(
                "line", ["id_token": try setup.token(subject: "u-nonce", nonce: "raw-nonce"), "nonce": "raw-nonce"])
            #expect(with["is_new_account"] as? Bool == true)
            let options = try await setup.get("/v1/login-options?platform=web").json()
            let line = (options["options"] as? [[String: Any]] ?? []).first { $0["provider"] as? String == "line" }
            #expect(line?["nonce_required"] as? Bool == true)
        }
    }

    @Test func aRotatedKeyIsFetchedOnItsFirstTokenAndAccepted() async throws {
        try await S.run { setup in
            // The broker's key sets allow one request-path refetch per 30 s; the test declares the
            // issuer's key set with no minimum interval, so the refetch the unknown kid causes is
            // the one the test sees (what happens 30 s after the last fetch in production).
            let jwksURL = setup.line.jwksURL(base: setup.base)
            setup.app.services.keySets.declare(
                setup.lineIssuer, cache: JWKSCache(source: .url(jwksURL), logger: TestDatabase.logger, minimumRefetchInterval: .zero))
            _ = try await setup.signIn("line", ["id_token": try setup.token(subject: "u-rot")])
            #expect(setup.line.keyFetches == 1)
            let newKid = try setup.line.rotate(.rs256, keepOld: false)
            let rotated = try setup.token(subject: "u-rot")
            #expect(try #require(rotated.split(separator: ".").first).isEmpty == false)
            let again = try await setup.signIn("line", ["id_token": rotated])
            #expect(again["is_new_account"] as? Bool == false)
            #expect(setup.line.keyFetches == 2, "the unknown kid \(newKid) made one refetch")
            // A kid the issuer never publishes is refused after its refetch.
            _ = try setup.line.rotate(.rs256, publish: false)
            let hidden = try await setup.post("/v1/sign-in/line", json: ["id_token": try setup.token(subject: "u-rot")])
            #expect(hidden.status == .unauthorized)
            #expect(hidden.problemCode == "unknown_key")
            #expect(setup.line.keyFetches == 3)
        }
    }

    @Test func keysDownWithNothingCachedIs503() async throws {
        try await S.run { setup in
            setup.line.keysFault = .unavailable
            let response = try await setup.post("/v1/sign-in/line", json: ["id_token": try setup.token(subject: "u-down")])
            #expect(response.status == .serviceUnavailable, "\(String(buffer: response.body))")
            #expect(response.problemCode == "provider_unavailable")
            #expect(setup.line.keyFetches >= 1)
            #expect(try await setup.count("accounts") == 0)
        }
    }

    // MARK: - Multi-tenant issuers

    @Test func aTidIssuerAcceptsItsAllowedTenantsOnly() async throws {
        try await S.run(enableLine: false) { setup in
            let status = try await setup.enable(
                "entra", issuer: setup.entraIssuer, clientIDs: [S.entraClient], extra: ["allowed-tid": [S.entraTenant]])
            #expect(status.settings["issuer"] == .string(setup.entraIssuer))
            #expect(status.settings["jwks_uri"] == .string(setup.entra.jwksURL(base: setup.base)))
            #expect(status.settings["allowed_tids"] == .array([.string(S.entraTenant)]))
            let ok = try await setup.signIn(
                "entra", ["id_token": try setup.token(setup.entra, subject: "pairwise-1", audience: S.entraClient, tenant: S.entraTenant)])
            #expect(ok[path: "identity.provider_scope"] as? String == setup.entra.issuer(base: setup.base, tenant: S.entraTenant))
            // A tenant the provider does not allow.
            let disallowed = try await setup.post(
                "/v1/sign-in/entra",
                json: ["id_token": try setup.token(setup.entra, subject: "pairwise-1", audience: S.entraClient, tenant: S.otherEntraTenant)]
            )
            #expect(disallowed.status == .unauthorized)
            #expect(disallowed.problemCode == "tenant_not_allowed")
            // A foreign tid: the token's iss is another tenant's than its tid.
            let foreign = try await setup.post(
                "/v1/sign-in/entra",
                json: [
                    "id_token": try setup.token(
                        setup.entra, subject: "pairwise-1", audience: S.entraClient, tenant: S.entraTenant,
                        iss: setup.entra.issuer(base: setup.base, tenant: S.otherEntraTenant))
                ])
            #expect(foreign.problemCode == "issuer_mismatch")
            // No tid, or one that is not a tenant id.
            for tid: JWTHeaderField in [.string("../common"), .int(5)] {
                let odd = try await setup.post(
                    "/v1/sign-in/entra",
                    json: ["id_token": try setup.token(setup.entra, subject: "p", audience: S.entraClient, extra: ["tid": tid])])
                #expect(odd.problemCode == "issuer_mismatch", "\(tid)")
            }
            #expect(try await setup.count("accounts") == 1)
        }
    }

    @Test func aTidIssuerWithoutAllowedTenantsAcceptsEachTenantAsItsOwnScope() async throws {
        try await S.run(enableLine: false) { setup in
            try await setup.enable("entra", issuer: setup.entraIssuer, clientIDs: [S.entraClient])
            let a = try await setup.signIn(
                "entra", ["id_token": try setup.token(setup.entra, subject: "same-sub", audience: S.entraClient, tenant: S.entraTenant)])
            let b = try await setup.signIn(
                "entra",
                ["id_token": try setup.token(setup.entra, subject: "same-sub", audience: S.entraClient, tenant: S.otherEntraTenant)])
            #expect(a[path: "account.id"] as? String != b[path: "account.id"] as? String, "one sub in two Entra tenants is two people")
            #expect(b[path: "identity.provider_scope"] as? String == setup.entra.issuer(base: setup.base, tenant: S.otherEntraTenant))
        }
    }

    // MARK: - Email trust

    @Test func emailTrustNeverDoesNotAutoLinkAndVerifiedDoes() async throws {
        try await S.run { setup in
            _ = try await TenantAdmin(database: setup.app.database, actor: "test").setAutoLinkVerifiedEmail("acme", true)
            try await setup.enable("yahoo", issuer: setup.yahooIssuer, clientIDs: [S.yahooClient], extra: ["email-trust": ["verified"]])
            try await setup.enable(
                "entra", issuer: setup.entraIssuer, clientIDs: [S.entraClient], extra: ["email-trust": ["verified"]])
            let first = try await setup.signIn(
                "yahoo", ["id_token": try setup.token(setup.yahoo, subject: "y-1", audience: S.yahooClient, email: "hanako@example.jp")])
            let accountID = try #require(first[path: "account.id"] as? String)
            // entra (verified): joins the account with that email.
            let joined = try await setup.signIn(
                "entra",
                [
                    "id_token": try setup.token(
                        setup.entra, subject: "e-1", audience: S.entraClient, tenant: S.entraTenant, email: "Hanako@Example.jp")
                ])
            #expect(joined[path: "account.id"] as? String == accountID)
            #expect(joined["linked_by"] as? String == "verified_email")
            // line (never, the default): a new account, flagged as a possible duplicate.
            let apart = try await setup.signIn("line", ["id_token": try setup.token(subject: "l-1", email: "hanako@example.jp")])
            #expect(apart[path: "account.id"] as? String != accountID)
            #expect(apart["is_new_account"] as? Bool == true)
            #expect(apart["linked_by"] is NSNull)
            #expect(apart["possible_duplicate"] as? Bool == true)
            #expect(try await setup.identityProviders(of: accountID) == ["entra", "yahoo"])
        }
    }

    // MARK: - Linking

    @Test func anOIDCIdentityLinksAndUnlinks() async throws {
        try await S.run { setup in
            try await setup.enable("yahoo", issuer: setup.yahooIssuer, clientIDs: [S.yahooClient])
            let person = try await setup.signIn(
                "yahoo", ["id_token": try setup.token(setup.yahoo, subject: "y-link", audience: S.yahooClient)])
            let accountID = try #require(person[path: "account.id"] as? String)
            let accessToken = try #require(person[path: "session.access_token"] as? String)
            let link = try await setup.post(
                "/v1/accounts/\(accountID)/identities",
                json: ["provider": "line", "id_token": try setup.token(subject: "l-link"), "name": ["given_name": "Hanako"]],
                accountToken: accessToken)
            #expect(link.status == .created, "\(String(buffer: link.body))")
            let linked = try link.json()
            #expect(linked[path: "identity.provider"] as? String == "line")
            #expect(linked[path: "identity.provider_scope"] as? String == setup.lineIssuer)
            let identityID = try #require(linked[path: "identity.id"] as? String)
            // A bad proof links nothing.
            let wrong = try await setup.post(
                "/v1/accounts/\(accountID)/identities",
                json: ["provider": "line", "id_token": try setup.token(subject: "l-other", audience: "someone-else")],
                accountToken: accessToken)
            #expect(wrong.problemCode == "audience_mismatch")
            #expect(try await setup.identityProviders(of: accountID) == ["line", "yahoo"])
            let viaLine = try await setup.signIn("line", ["id_token": try setup.token(subject: "l-link")])
            #expect(viaLine[path: "account.id"] as? String == accountID)

            let unlink = try await setup.delete("/v1/accounts/\(accountID)/identities/\(identityID)", accountToken: accessToken)
            #expect(unlink.status == .ok, "\(String(buffer: unlink.body))")
            #expect(try await setup.identityProviders(of: accountID) == ["yahoo"])
            let afterwards = try await setup.signIn("line", ["id_token": try setup.token(subject: "l-link")])
            #expect(afterwards["is_new_account"] as? Bool == true)
        }
    }

    // MARK: - Login options and guideline 4.8

    @Test func loginOptionsListTheProviderWithItsNameAndType() async throws {
        try await S.run { setup in
            let web = try await setup.get("/v1/login-options?platform=web").json()
            let options = web["options"] as? [[String: Any]] ?? []
            let line = try #require(options.first { $0["provider"] as? String == "line" })
            #expect(line["type"] as? String == "oidc")
            #expect(line["display_name"] as? String == "LINE")
            #expect(line["client_id"] as? String == S.lineClient)
            #expect(line["client_ids"] as? [String] == [S.lineClient])
            #expect(line["nonce_mode"] as? String == "raw")
            #expect(line["nonce_required"] as? Bool == false)
            // Not offered on iOS (its platforms are web and android); not at all in bravo.
            let ios = try await setup.get("/v1/login-options?platform=ios").json()
            #expect((ios["options"] as? [[String: Any]] ?? []).isEmpty)
            let bravo = try await setup.get("/v1/login-options?platform=web", tenant: "bravo").json()
            #expect((bravo["options"] as? [[String: Any]] ?? []).isEmpty)
            // Without a display name, the login options name it by its id.
            try await setup.enable("yahoo", issuer: setup.yahooIssuer, clientIDs: [S.yahooClient])
            let named = try await eventuallyValue {
                try await setup.get("/v1/login-options?platform=web").json()
            } until: {
                ($0["options"] as? [[String: Any]] ?? []).contains { $0["provider"] as? String == "yahoo" }
            }
            let yahoo = (named["options"] as? [[String: Any]] ?? []).first { $0["provider"] as? String == "yahoo" }
            #expect(yahoo?["display_name"] as? String == "yahoo")
            #expect(yahoo?["type"] as? String == "oidc")
        }
    }

    @Test func anUnattestedOIDCProviderOnIOSWithoutAppleIsRefusedUnlessForced() async throws {
        try await S.run(enableLine: false) { setup in
            let refused = await brokerErrorCode {
                try await setup.enable("line", issuer: setup.lineIssuer, clientIDs: [S.lineClient], platforms: [.ios])
            }
            #expect(refused == "login_policy_violation")
            #expect(try await setup.stored("line") == nil)
            // Offered everywhere (no --platforms) is offered on iOS too.
            let everywhere = await brokerErrorCode {
                try await setup.enable("line", issuer: setup.lineIssuer, clientIDs: [S.lineClient], platforms: [])
            }
            #expect(everywhere == "login_policy_violation")
            // Forced: applied.
            try await setup.enable("yahoo", issuer: setup.yahooIssuer, clientIDs: [S.yahooClient], platforms: [.ios], force: true)
            #expect(try await setup.stored("yahoo")?.enabled == true)

            // Attested, line qualifies: enabling it on iOS is allowed, and it is listed first there.
            let policy = PolicyAdmin(database: setup.app.database, actor: "test")
            _ = try await policy.attest(
                tenant: "acme", provider: try #require(ProviderID(rawValue: "line")), limitsDataToNameEmail: true, privateEmail: true,
                noAdTracking: true)
            let status = try await setup.enable("line", issuer: setup.lineIssuer, clientIDs: [S.lineClient], platforms: [.ios])
            #expect(status.attested == true)
            let ios = try await eventuallyValue {
                try await setup.get("/v1/login-options?platform=ios").json()
            } until: {
                ($0["options"] as? [[String: Any]] ?? []).count == 2
            }
            let options = ios["options"] as? [[String: Any]] ?? []
            #expect(options.compactMap { $0["provider"] as? String } == ["line", "yahoo"])
            #expect(options.first?["qualifies"] as? Bool == true)
            #expect(options.last?["qualifies"] as? Bool == false)
            #expect(ios["policy"] is NSNull, "line qualifies, so yahoo no longer puts the tenant in violation")
        }
    }

    // MARK: - Disable

    @Test func aDisabledProviderAnswersProviderNotEnabledAndKeepsItsIdentities() async throws {
        try await S.run { setup in
            let person = try await setup.signIn("line", ["id_token": try setup.token(subject: "u-off")])
            let accountID = try #require(person[path: "account.id"] as? String)
            let line = try #require(ProviderID(rawValue: "line"))
            try await setup.admin.disable(tenant: "acme", provider: line)
            #expect(try await setup.stored("line")?.enabled == false)
            // The broker's configuration cache is cleared by LISTEN/NOTIFY a moment after commit.
            let turnedOff = try await eventually {
                try await setup.post("/v1/sign-in/line", json: ["id_token": try setup.token(subject: "u-off")]).problemCode
                    == "provider_not_enabled"
            }
            #expect(turnedOff)
            let refused = try await setup.post("/v1/sign-in/line", json: ["id_token": try setup.token(subject: "u-off")])
            #expect(refused.status == .badRequest)
            #expect(try await setup.identityProviders(of: accountID) == ["line"])
            #expect(try await setup.count("identities") == 1)
            let shown = try await setup.admin.show(tenant: "acme", provider: line, registry: setup.registry)
            #expect(shown.enabled == false)
            #expect(shown.settings["issuer"] == .string(setup.lineIssuer), "settings are kept")
            let twice = await brokerErrorCode { try await setup.admin.disable(tenant: "acme", provider: line) }
            #expect(twice == "provider_not_enabled")
            // Enabled again, the identity signs in to its account.
            try await setup.enable("line", issuer: setup.lineIssuer, clientIDs: [S.lineClient])
            let backOn = try await eventually {
                let response = try await setup.post("/v1/sign-in/line", json: ["id_token": try setup.token(subject: "u-off")])
                let signedInto = (try? response.json())?[path: "account.id"] as? String
                return response.status == .ok && signedInto == accountID
            }
            #expect(backOn)
        }
    }

    // MARK: - Boundaries

    @Test func twoOIDCProvidersOfOneTenantAreKeptApart() async throws {
        try await S.run { setup in
            try await setup.enable("yahoo", issuer: setup.yahooIssuer, clientIDs: [S.yahooClient])
            let viaLine = try await setup.signIn("line", ["id_token": try setup.token(subject: "same-sub")])
            let viaYahoo = try await setup.signIn(
                "yahoo", ["id_token": try setup.token(setup.yahoo, subject: "same-sub", audience: S.yahooClient)])
            #expect(viaLine[path: "account.id"] as? String != viaYahoo[path: "account.id"] as? String)
            #expect(viaYahoo[path: "identity.provider"] as? String == "yahoo")
            #expect(viaYahoo[path: "identity.provider_scope"] as? String == setup.yahooIssuer)
            // A line token at yahoo, even one issued to yahoo's client, is not yahoo's: yahoo's
            // key set has no line key; and the other way round.
            let crossed = try await setup.post(
                "/v1/sign-in/yahoo", json: ["id_token": try setup.token(subject: "same-sub", audience: S.yahooClient)])
            #expect(crossed.problemCode == "unknown_key")
            let reversed = try await setup.post(
                "/v1/sign-in/line", json: ["id_token": try setup.token(setup.yahoo, subject: "same-sub", audience: S.lineClient)])
            #expect(reversed.problemCode == "unknown_key")
            // Signed by line's key but naming yahoo as issuer: line refuses the issuer.
            let spoofed = try await setup.post(
                "/v1/sign-in/line", json: ["id_token": try setup.token(subject: "same-sub", iss: setup.yahooIssuer)])
            #expect(spoofed.problemCode == "issuer_mismatch")
            #expect(try await setup.count("accounts") == 2)
        }
    }

    @Test func oneIssuerInTwoTenantsIsTwoProviders() async throws {
        try await S.run { setup in
            try await setup.enable("line", issuer: setup.lineIssuer, clientIDs: [S.bravoLineClient], tenant: "bravo")
            let acme = try await setup.signIn("line", ["id_token": try setup.token(subject: "same-person")])
            let bravo = try await setup.signIn(
                "line", ["id_token": try setup.token(subject: "same-person", audience: S.bravoLineClient)], tenant: "bravo")
            #expect(acme[path: "account.id"] as? String != bravo[path: "account.id"] as? String)
            // Each tenant's clients only.
            let acmeTokenAtBravo = try await setup.post(
                "/v1/sign-in/line", json: ["id_token": try setup.token(subject: "x")], tenant: "bravo")
            #expect(acmeTokenAtBravo.problemCode == "audience_mismatch")
            let bravoTokenAtAcme = try await setup.post(
                "/v1/sign-in/line", json: ["id_token": try setup.token(subject: "x", audience: S.bravoLineClient)])
            #expect(bravoTokenAtAcme.problemCode == "audience_mismatch")
            // One key set for the issuer, whatever the number of tenants.
            #expect(setup.line.keyFetches == 1)
        }
    }

    @Test func anIDAnotherTenantConfiguredIsUnknownHere() async throws {
        try await S.run { setup in
            let response = try await setup.post("/v1/sign-in/line", json: ["id_token": try setup.token(subject: "u")], tenant: "plain")
            #expect(response.status == .notFound)
            #expect(response.problemCode == "unknown_provider")
            let never = try await setup.post("/v1/sign-in/nobody", json: ["id_token": try setup.token(subject: "u")])
            #expect(never.problemCode == "unknown_provider")
            let link = try await setup.post(
                "/v1/sign-in/line", json: ["id_token": try setup.token(subject: "u")], tenant: "bravo")
            #expect(link.problemCode == "unknown_provider")
            #expect(setup.line.keyFetches == 0, "refused before any key is fetched")
        }
    }
}

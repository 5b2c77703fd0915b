import BrokerCore
import BrokerApplication
import BrokerServer
import Foundation
import HTTPTypes
import HummingbirdTesting
import MockIdP
import NIOCore
import Storage
import Testing
import TestSupport

/// `GET /v1/login-options?platform=` (issue 11): the providers to show on a platform, the
/// qualifying option first; `policy` names a guideline 4.8 violation; sign-ins through a
/// non-qualifying provider of a tenant in violation still work and are counted.
@Suite(.serialized) struct LoginOptionsTests {
    typealias S = ProviderTestSetup

    /// ``ProviderTestSetup`` (acme: Google on ios+web, Facebook on ios+android with Limited
    /// Login; bravo: Google everywhere; plain: nothing), with `apple` adding to acme an iOS app
    /// com.acme.app (primary), a macOS app com.acme.mac and a Services ID com.acme.web.
    static func run(apple: Bool, _ test: @Sendable @escaping (S) async throws -> Void) async throws {
        try await S.run { setup in
            if apple {
                let admin = AppleAdmin(database: setup.app.database, actor: "test")
                _ = try await admin.setTeam(
                    tenant: "acme", teamID: "TEAM000001", keyID: "KEY0000001", p8PEM: S.p8PEM, secrets: setup.app.secrets)
                _ = try await admin.addGroup(tenant: "acme", primaryAppID: "com.acme.app")
                _ = try await admin.addClient(
                    tenant: "acme", group: "com.acme.app", clientID: "com.acme.mac", kind: .app, nonceMode: .raw, redirectURIs: [],
                    returnURLs: [], nonceRequired: false, platforms: [.macos])
                _ = try await admin.addClient(
                    tenant: "acme", group: "com.acme.app", clientID: "com.acme.web", kind: .service, nonceMode: .sha256,
                    redirectURIs: ["https://acme.example.com/apple/callback"], returnURLs: [])
            }
            try await test(setup)
        }
    }

    static func options(_ setup: S, _ platform: String, tenant: String = "acme") async throws -> [String: Any] {
        let response = try await get(setup, "/v1/login-options?platform=\(platform)", tenant: tenant)
        #expect(response.status == .ok, "\(String(buffer: response.body))")
        return try response.json()
    }

    static func get(_ setup: S, _ uri: String, tenant: String = "acme") async throws -> TestResponse {
        try await setup.client.execute(uri: uri, method: .get, headers: bearer(setup.keys[tenant] ?? ""))
    }

    static func providers(_ body: [String: Any]) -> [String] {
        (body["options"] as? [[String: Any]] ?? []).compactMap { $0["provider"] as? String }
    }

    static func option(_ body: [String: Any], _ provider: String) -> [String: Any] {
        (body["options"] as? [[String: Any]] ?? []).first { $0["provider"] as? String == provider } ?? [:]
    }

    @Test func eachPlatformListsItsProvidersAppleFirst() async throws {
        try await Self.run(apple: true) { setup in
            let ios = try await Self.options(setup, "ios")
            #expect(ios["platform"] as? String == "ios")
            #expect(Self.providers(ios) == ["apple", "google", "facebook"])
            #expect(ios["policy"] is NSNull)
            let apple = Self.option(ios, "apple")
            #expect(apple["client_id"] as? String == "com.acme.app")
            #expect(apple["client_ids"] as? [String] == ["com.acme.app"])
            #expect(apple["nonce_mode"] as? String == "sha256")
            #expect(apple["nonce_required"] as? Bool == true)
            #expect(apple["qualifies"] as? Bool == true)
            #expect(apple["start_endpoint"] is NSNull)
            let google = Self.option(ios, "google")
            #expect(google["client_id"] as? String == S.webClient)
            #expect(google["client_ids"] as? [String] == [S.webClient, S.iosClient])
            #expect(google["qualifies"] as? Bool == false)
            #expect(google["nonce_mode"] as? String == "raw")
            #expect(Self.option(ios, "facebook")["nonce_mode"] as? String == "raw", "Limited Login takes a raw nonce")
            // Each option names its type and the name to show.
            for (provider, name) in [("apple", "Apple"), ("google", "Google"), ("facebook", "Facebook")] {
                #expect(Self.option(ios, provider)["type"] as? String == provider)
                #expect(Self.option(ios, provider)["display_name"] as? String == name)
            }

            let macos = try await Self.options(setup, "macos")
            #expect(Self.providers(macos) == ["apple"])
            #expect(Self.option(macos, "apple")["client_id"] as? String == "com.acme.mac")
            #expect(Self.option(macos, "apple")["nonce_mode"] as? String == "raw")

            let web = try await Self.options(setup, "web")
            #expect(Self.providers(web) == ["apple", "google"])
            #expect(Self.option(web, "apple")["client_id"] as? String == "com.acme.web")

            let android = try await Self.options(setup, "android")
            #expect(Self.providers(android) == ["apple", "facebook"])
            #expect(android["policy"] is NSNull)
        }
    }

    @Test func attestedProvidersQualifyUnderPrivacyEquivalentOnly() async throws {
        try await Self.run(apple: false) { setup in
            let policy = PolicyAdmin(database: setup.app.database, actor: "test")
            let before = try await Self.options(setup, "ios")
            #expect(Self.providers(before) == ["google", "facebook"])
            let violation = try #require(before["policy"] as? [String: Any])
            #expect(violation["guideline"] as? String == "4.8")
            #expect(violation["status"] as? String == "violation")
            #expect(violation["mode"] as? String == "privacy-equivalent")
            #expect(violation["non_qualifying_providers"] as? [String] == ["google", "facebook"])

            _ = try await policy.attest(
                tenant: "acme", provider: .facebook, limitsDataToNameEmail: true, privateEmail: true, noAdTracking: true)
            let attested = try await eventuallyValue {
                try await Self.options(setup, "ios")
            } until: {
                Self.option($0, "facebook")["qualifies"] as? Bool == true
            }
            #expect(Self.providers(attested) == ["facebook", "google"], "the qualifying option comes first")
            #expect(attested["policy"] is NSNull)

            _ = try await policy.setMode(tenant: "acme", .appleRequired, force: true)
            let appleRequired = try await eventuallyValue {
                try await Self.options(setup, "ios")
            } until: {
                !($0["policy"] is NSNull)
            }
            #expect(Self.option(appleRequired, "facebook")["qualifies"] as? Bool == false)
            #expect((appleRequired["policy"] as? [String: Any])?["mode"] as? String == "apple-required")
            // Web and Android are not App Store platforms: never a violation.
            #expect(try await Self.options(setup, "web")["policy"] is NSNull)
            #expect(try await Self.options(setup, "android")["policy"] is NSNull)
        }
    }

    /// API keys' callers are cached with their tenant; the catalog reads the tenant's policy
    /// itself, so a copy from before a change cannot rebuild the old answer.
    @Test func theCatalogReadsThePolicyNotTheCallersCopy() async throws {
        try await Self.run(apple: false) { setup in
            let stale = setup.tenant
            #expect(stale.policy.mode == .privacyEquivalent)
            _ = try await PolicyAdmin(database: setup.app.database, actor: "test").setMode(tenant: "acme", .appleRequired, force: true)
            let catalog = try await TenantScope.tenant(stale.id) {
                try await LoginCatalogStore(database: setup.app.database).catalog(for: stale)
            }
            #expect(catalog.policy.settings.mode == .appleRequired)
        }
    }

    /// A catalog read while a change notice arrived answers its request and is not kept; the
    /// next read reads again (here it sees a change made after it, with no notice of its own).
    @Test func aCatalogANoticeOvertookIsNotKept() async throws {
        try await Self.run(apple: false) { setup in
            let store = LoginCatalogStore(database: setup.app.database)
            let tenant = setup.tenant
            let overtaken = try await whileReadWaitsOnTable("provider_configs", in: setup.app) {
                try await TenantScope.tenant(tenant.id) { try await store.catalog(for: tenant) }
            } meanwhile: {
                store.invalidate(tenantID: tenant.id)
            }
            #expect(overtaken.policy.settings.mode == .privacyEquivalent)
            _ = try await PolicyAdmin(database: setup.app.database, actor: "test").setMode(tenant: "acme", .appleRequired, force: true)
            let current = try #require(try await setup.app.database.tenants.find(slug: "acme"))
            let next = try await TenantScope.tenant(tenant.id) { try await store.catalog(for: current) }
            #expect(next.policy.settings.mode == .appleRequired)
        }
    }

    @Test func anExemptTenantIsNotInViolation() async throws {
        try await Self.run(apple: false) { setup in
            _ = try await PolicyAdmin(database: setup.app.database, actor: "test").exempt(
                tenant: "acme", reason: .educationEnterprise, note: "Staff app with company accounts")
            let ios = try await eventuallyValue {
                try await Self.options(setup, "ios")
            } until: {
                $0["policy"] is NSNull
            }
            #expect(Self.providers(ios) == ["google", "facebook"])
        }
    }

    @Test func aTenantWithNothingEnabledHasNoOptions() async throws {
        try await Self.run(apple: false) { setup in
            let plain = try await Self.options(setup, "ios", tenant: "plain")
            #expect(Self.providers(plain).isEmpty)
            #expect(plain["policy"] is NSNull)
        }
    }

    @Test func thePlatformMustBeOneOfTheFour() async throws {
        try await Self.run(apple: false) { setup in
            for uri in [
                "/v1/login-options", "/v1/login-options?platform=", "/v1/login-options?platform=windows", "/v1/login-options?platform=IOS",
            ] {
                let response = try await Self.get(setup, uri)
                #expect(response.status == .badRequest, "\(uri)")
                #expect(response.problemCode == "invalid_request")
            }
            let anonymous = try await setup.client.execute(uri: "/v1/login-options?platform=ios", method: .get)
            #expect(anonymous.status == .unauthorized)
        }
    }

    @Test func operatorChangesReachTheCachedAnswer() async throws {
        try await Self.run(apple: false) { setup in
            let response = try await Self.get(setup, "/v1/login-options?platform=macos", tenant: "bravo")
            #expect(response.headers[.cacheControl] == "private, max-age=60")
            #expect(Self.providers(try response.json()) == ["google"], "an empty platform list is every platform")
            #expect(Self.providers(try await Self.options(setup, "ios")) == ["google", "facebook"])
            _ = try await ProviderAdmin(database: setup.app.database, actor: "test").enableGoogle(
                tenant: "acme", clientIDs: [S.webClient], hostedDomain: nil, platforms: [.web], force: true)
            let changed = try await eventuallyValue {
                try await Self.options(setup, "ios")
            } until: {
                Self.providers($0) == ["facebook"]
            }
            #expect(Self.providers(changed) == ["facebook"])
        }
    }

    @Test func signInsOfATenantInViolationWorkAndAreCounted() async throws {
        try await Self.run(apple: false) { setup in
            func counted(_ platform: String) -> Double {
                Self.metric(
                    #"broker_policy_violation_sign_ins_total{tenant="acme",provider="google",platform="\#(platform)"}"#)
            }
            let before = counted("ios")
            let signIn = try await setup.post(
                "/v1/sign-in/google", json: ["id_token": try setup.googleToken(subject: "g-violation"), "platform": "ios"])
            #expect(signIn.status == .ok)
            #expect(counted("ios") == before + 1)
            // Not counted on a platform the guideline does not govern, nor without a platform.
            let webBefore = counted("web")
            _ = try await setup.post(
                "/v1/sign-in/google", json: ["id_token": try setup.googleToken(subject: "g-violation"), "platform": "web"])
            _ = try await setup.post("/v1/sign-in/google", json: ["id_token": try setup.googleToken(subject: "g-violation")])
            #expect(counted("web") == webBefore)
            #expect(counted("ios") == before + 1)
        }
    }

    @Test func signInsOfACompliantTenantAreNotCounted() async throws {
        try await Self.run(apple: true) { setup in
            let name = #"broker_policy_violation_sign_ins_total{tenant="acme",provider="google",platform="ios"}"#
            let before = Self.metric(name)
            let signIn = try await setup.post(
                "/v1/sign-in/google", json: ["id_token": try setup.googleToken(subject: "g-compliant"), "platform": "ios"])
            #expect(signIn.status == .ok)
            #expect(Self.metric(name) == before)
        }
    }

    /// The value of one sample in `/metrics`' text (0 when absent).
    static func metric(_ sample: String) -> Double {
        for line in BrokerMetrics.render().split(separator: "\n") where line.hasPrefix(sample + " ") {
            return Double(line.dropFirst(sample.count + 1)) ?? 0
        }
        return 0
    }
}

/// Polls `read` until `condition` holds of its value (LISTEN/NOTIFY reaches the caches
/// asynchronously); returns the last value read.
func eventuallyValue<T>(
    timeout: Duration = .seconds(5), _ read: () async throws -> T, until condition: (T) -> Bool
) async throws -> T {
    let deadline = ContinuousClock.now + timeout
    var value = try await read()
    while !condition(value), ContinuousClock.now < deadline {
        try await Task.sleep(for: .milliseconds(50))
        value = try await read()
    }
    return value
}

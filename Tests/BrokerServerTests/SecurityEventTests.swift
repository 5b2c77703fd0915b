import BrokerCore
@testable import BrokerApplication
@testable import BrokerServer
import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Storage
import Synchronization
import Testing

/// Security events reach the audit log (issue 9 §6, decision 0020): sign-in, sign-out, family
/// revocation on reuse, token replay, refused API keys (sampled).
@Suite struct SecurityEventTests {
    func events(_ setup: AppleTestSetup, tenant: Bool = true) async throws -> [AuditLogRepository.SecurityEvent] {
        try await setup.app.database.auditLog.securityEvents(
            tenantID: tenant ? setup.tenant.id : nil, accountID: nil, action: nil, limit: 100)
    }

    @Test func sessionEventsCarryTenantAccountAndSession() async throws {
        try await AppleTestSetup.run { setup in
            let first = try await setup.signIn(["client_id": "com.acme.app", "identity_token": try setup.token(subject: "ev")])
            let accountID = try #require((first[path: "account.id"] as? String).flatMap(UUID.init(uuidString:)))
            let refreshToken = try #require(first[path: "session.refresh_token"] as? String)

            // Reuse after the interval: the family is revoked.
            let rotated = try await setup.post("/v1/sessions/refresh", json: ["refresh_token": refreshToken])
            #expect(rotated.status == .ok)
            try await setup.ageSpentRefreshTokens(by: 60)
            let reuse = try await setup.post("/v1/sessions/refresh", json: ["refresh_token": refreshToken])
            #expect(reuse.problemCode == "invalid_grant")

            // A second session, signed out.
            _ = try await setup.signIn(["client_id": "com.acme.app", "identity_token": try setup.token(subject: "ev")])
            let signOut = try await setup.post("/v1/accounts/\(accountID.uuidString)/sign-out", json: [:])
            #expect(signOut.status == .ok)

            let events = try await events(setup)
            let signIns = events.filter { $0.action == "session.signed_in" }
            #expect(signIns.count == 2)
            #expect(signIns.allSatisfy { $0.accountID == accountID && $0.sessionID != nil && $0.target == "com.acme.app" })
            let family = try #require(events.first { $0.action == "session.family_revoked" })
            #expect(family.accountID == accountID && family.tenantID == setup.tenant.id)
            #expect(family.sessionID == signIns.last?.sessionID, "the first session (oldest sign-in) lost its family")
            let signedOut = try #require(events.first { $0.action == "session.signed_out" })
            #expect(signedOut.sessionID == signIns.first?.sessionID)
            // Filtered by account (through the sessions' account index).
            let mine = try await setup.app.database.auditLog.securityEvents(
                tenantID: setup.tenant.id, accountID: accountID, action: "session", limit: 100)
            #expect(mine.count == 4)
        }
    }

    @Test func aReplayedTokenIsRecorded() async throws {
        try await AppleTestSetup.run { setup in
            let token = try setup.token(subject: "replayed")
            _ = try await setup.signIn(["client_id": "com.acme.app", "identity_token": token])
            let replay = try await setup.post("/v1/sign-in/apple", json: ["client_id": "com.acme.app", "identity_token": token])
            #expect(replay.problemCode == "token_replayed")
            #expect(
                try await eventually {
                    try await events(setup).contains {
                        $0.action == "sign_in.token_replayed" && $0.target == "com.acme.app" && $0.details.contains("\"replayed\"")
                    }
                })
        }
    }

    @Test func refusedAPIKeysAreSampled() async throws {
        try await AppleTestSetup.run { setup in
            for _ in 0..<5 {
                let response = try await setup.client.execute(
                    uri: "/v1/tenant", method: .get, headers: [.authorization: "Bearer ibk_AAAAAAAA_\(String(repeating: "B", count: 35))"])
                #expect(response.status == .unauthorized)
            }
            await setup.app.services.securityEvents.settled()
            let refused = try await events(setup, tenant: false).filter { $0.action == "api_key.refused" }
            // Five failures inside one interval: one row. The key's visible prefix, never the key.
            #expect(refused.count == 1)
            #expect(refused.first?.target == "ibk_AAAAAAAA")
            #expect(refused.first?.details.contains("invalid_api_key") == true)
            #expect(refused.first?.details.contains(String(repeating: "B", count: 35)) == false)
        }
    }
}

// MARK: - Sampling per tenant, reason and key (issue 20 §6)

/// A clock the test moves: the sampler's windows pass without sleeping.
final class SamplingClock: Sendable {
    let start = ContinuousClock.now
    private let offset = Mutex(Duration.zero)

    func advance(by duration: Duration) { offset.withLock { $0 += duration } }
    var now: ContinuousClock.Instant { start + offset.withLock { $0 } }
    var sampling: SecurityEventSampling { SecurityEventSampling(window: .seconds(10), now: { [self] in now }) }
}

extension SecurityEventTests {
    /// The rows of `action`, newest first, once every write scheduled so far has finished.
    static func rows(_ app: TestApp, _ action: String, tenantID: UUID? = nil) async throws -> [(
        event: AuditLogRepository.SecurityEvent, details: [String: Any]
    )] {
        await app.services.securityEvents.settled()
        return try await app.database.auditLog.securityEvents(tenantID: tenantID, accountID: nil, action: action, limit: 10_000)
            .filter { $0.action == action }
            .map { event in
                (event, (try? JSONSerialization.jsonObject(with: Data(event.details.utf8))) as? [String: Any] ?? [:])
            }
    }

    /// 2,000 replays of one token wrote 2,000 rows. Now: one row per tenant per window, the
    /// next counting those left out.
    /// The API key's rate limit is raised out of the way: the flood is about the audit rows, and
    /// a machine that sends it within a few seconds would meet the default 200/s (burst 400).
    @Test func twoThousandReplaysOfOneTokenWriteOneRowPerWindow() async throws {
        let clock = SamplingClock()
        let unlimited = AbuseLimits(apiKey: RateLimit(perSecond: 100_000, burst: 100_000))
        try await AppleTestSetup.run(securityEvents: clock.sampling, abuseLimits: unlimited) { setup in
            let token = try setup.token(subject: "flood")
            _ = try await setup.signIn(["client_id": "com.acme.app", "identity_token": token])
            let replayed = try await withThrowingTaskGroup(of: Int.self) { group in
                for worker in 0..<8 {
                    group.addTask {
                        var replayed = 0
                        for _ in stride(from: worker, to: 2_000, by: 8) {
                            let replay = try await setup.post(
                                "/v1/sign-in/apple", json: ["client_id": "com.acme.app", "identity_token": token])
                            if replay.problemCode == "token_replayed" { replayed += 1 }
                        }
                        return replayed
                    }
                }
                var total = 0
                for try await count in group { total += count }
                return total
            }
            #expect(replayed == 2_000)
            var rows = try await Self.rows(setup.app, "sign_in.token_replayed", tenantID: setup.tenant.id)
            #expect(rows.count == 1, "one row for the window, not one per replay")
            #expect(rows.first?.details["replays_not_recorded_before"] as? Int == 0)
            #expect(rows.first?.event.target == "com.acme.app")

            // The next window: one row, counting the 1,999 left out.
            clock.advance(by: .seconds(10))
            let replay = try await setup.post("/v1/sign-in/apple", json: ["client_id": "com.acme.app", "identity_token": token])
            #expect(replay.problemCode == "token_replayed")
            rows = try await Self.rows(setup.app, "sign_in.token_replayed", tenantID: setup.tenant.id)
            #expect(rows.count == 2)
            #expect(rows.contains { $0.details["replays_not_recorded_before"] as? Int == 1_999 }, "\(rows.map(\.details))")
        }
    }

    /// A flood of one tenant's replays does not hide another tenant's.
    @Test func twoTenantsReplaysEachGetTheirRow() async throws {
        let clock = SamplingClock()
        try await AppleTestSetup.run(securityEvents: clock.sampling) { setup in
            let bravo = try await setup.app.createTenant("bravo")
            let bravoKey = try await setup.app.createKey("bravo")
            let admin = AppleAdmin(database: setup.app.database, actor: "test")
            _ = try await admin.setTeam(
                tenant: "bravo", teamID: AppleTestSetup.teamID, keyID: AppleTestSetup.keyID,
                p8PEM: P256.Signing.PrivateKey().pemRepresentation, secrets: setup.app.secrets)
            _ = try await admin.addGroup(tenant: "bravo", primaryAppID: "com.bravo.app", nonceRequired: false)

            let acmeToken = try setup.token(subject: "a")
            _ = try await setup.signIn(["client_id": "com.acme.app", "identity_token": acmeToken])
            for _ in 0..<50 {
                _ = try await setup.post("/v1/sign-in/apple", json: ["client_id": "com.acme.app", "identity_token": acmeToken])
            }
            let bravoToken = try setup.token(subject: "b", clientID: "com.bravo.app")
            let first = try await setup.post(
                "/v1/sign-in/apple", json: ["client_id": "com.bravo.app", "identity_token": bravoToken], key: bravoKey)
            #expect(first.status == .ok, "\(String(buffer: first.body))")
            let replay = try await setup.post(
                "/v1/sign-in/apple", json: ["client_id": "com.bravo.app", "identity_token": bravoToken], key: bravoKey)
            #expect(replay.problemCode == "token_replayed")

            let acme = try await Self.rows(setup.app, "sign_in.token_replayed", tenantID: setup.tenant.id)
            let bravoRows = try await Self.rows(setup.app, "sign_in.token_replayed", tenantID: bravo.id)
            #expect(acme.count == 1)
            #expect(bravoRows.count == 1)
            #expect(bravoRows.first?.event.target == "com.bravo.app")
        }
    }

    /// Junk keys first (unknown, malformed, missing: one shared bucket per reason, no tenant),
    /// then a revoked key of another tenant and a key of a disabled tenant: each of those is
    /// recorded, with its tenant and key; the junk counts come with the next window.
    @Test func aJunkKeyFloodDoesNotHideARevokedKeyOfAnotherTenant() async throws {
        let clock = SamplingClock()
        try await TestApp.run(securityEvents: clock.sampling) { app, client in
            _ = try await app.createTenant("acme")
            let globex = try await app.createTenant("globex")
            let initech = try await app.createTenant("initech")
            let keys = APIKeyAdmin(database: app.database, actor: "test")
            let (revoked, revokedKey) = try await keys.create(tenant: "globex", name: "old", scopes: [])
            let (otherRevoked, otherRevokedKey) = try await keys.create(tenant: "globex", name: "older", scopes: [])
            _ = try await keys.revoke(tenant: "globex", id: revoked.id.uuidString)
            _ = try await keys.revoke(tenant: "globex", id: otherRevoked.id.uuidString)
            let (disabledTenantKey, disabledKey) = try await keys.create(tenant: "initech", name: "ci", scopes: [])
            _ = try await TenantAdmin(database: app.database, actor: "test").setStatus("initech", .disabled)

            // 300 junk keys, each with a prefix of its own.
            for index in 0..<100 {
                let junk = APIKeyToken.generate().value
                #expect(
                    try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(junk)) { $0.problemCode } == "invalid_api_key"
                )
                _ = try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer("not-a-key-\(index)")) { $0.status }
                _ = try await client.execute(uri: "/v1/tenant", method: .get, headers: [:]) { $0.status }
            }
            for _ in 0..<3 {
                #expect(
                    try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(revokedKey)) { $0.problemCode }
                        == "invalid_api_key")
            }
            #expect(
                try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(otherRevokedKey)) { $0.problemCode }
                    == "invalid_api_key")
            let disabled = try await eventually {
                try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(disabledKey)) {
                    $0.problemCode == "tenant_disabled"
                }
            }
            #expect(disabled)

            var rows = try await Self.rows(app, "api_key.refused")
            func reason(_ row: (event: AuditLogRepository.SecurityEvent, details: [String: Any])) -> String? {
                row.details["reason"] as? String
            }
            // Junk: one row per reason, of no tenant.
            for junk in ["invalid_api_key", "malformed_api_key", "missing_api_key"] {
                let matching = rows.filter { reason($0) == junk }
                #expect(matching.count == 1, "\(junk): \(matching.map(\.details))")
                #expect(matching.first?.event.tenantID == nil)
            }
            // Each revoked key of globex: its own row, with tenant and key; answered as unknown.
            let revokedRows = rows.filter { reason($0) == "api_key_revoked" }
            #expect(
                Set(revokedRows.compactMap { $0.details["key_id"] as? String }) == [
                    revoked.id.lowercasedString, otherRevoked.id.lowercasedString,
                ])
            #expect(revokedRows.allSatisfy { $0.event.tenantID == globex.id && $0.details["code"] as? String == "invalid_api_key" })
            #expect(revokedRows.contains { $0.event.target == revoked.prefix })
            let disabledRows = rows.filter { reason($0) == "tenant_disabled" }
            #expect(disabledRows.count == 1)
            #expect(disabledRows.first?.event.tenantID == initech.id)
            #expect(disabledRows.first?.details["key_id"] as? String == disabledTenantKey.id.lowercasedString)
            #expect(rows.count == 6, "\(rows.map(\.details))")

            // The next window: the counts left out come with the next row of each bucket, or
            // with a row of their own when the bucket falls silent.
            clock.advance(by: .seconds(10))
            #expect(
                try await client.execute(uri: "/v1/tenant", method: .get, headers: bearer(APIKeyToken.generate().value)) { $0.problemCode }
                    == "invalid_api_key")
            rows = try await Self.rows(app, "api_key.refused")
            let unknownCounts = rows.filter { reason($0) == "invalid_api_key" }.compactMap {
                $0.details["failures_not_recorded_before"] as? Int
            }
            #expect(unknownCounts.sorted() == [0, 99], "\(unknownCounts)")
            let closed = rows.filter { $0.details["window_closed"] as? Bool == true }
            #expect(
                Set(closed.compactMap(reason)) == ["malformed_api_key", "missing_api_key", "api_key_revoked"], "\(closed.map(\.details))")
            #expect(closed.contains { reason($0) == "malformed_api_key" && $0.details["failures_not_recorded_before"] as? Int == 99 })
            #expect(
                closed.contains {
                    $0.details["key_id"] as? String == revoked.id.lowercasedString
                        && $0.details["failures_not_recorded_before"] as? Int == 2
                })
        }
    }
}

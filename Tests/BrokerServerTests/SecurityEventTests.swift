import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Storage
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
            #expect(try await eventually { try await events(setup, tenant: false).contains { $0.action == "api_key.refused" } })
            try await Task.sleep(for: .milliseconds(300))
            let refused = try await events(setup, tenant: false).filter { $0.action == "api_key.refused" }
            // Five failures inside one interval: one row. The key's visible prefix, never the key.
            #expect(refused.count == 1)
            #expect(refused.first?.target == "ibk_AAAAAAAA")
            #expect(refused.first?.details.contains("invalid_api_key") == true)
            #expect(refused.first?.details.contains(String(repeating: "B", count: 35)) == false)
        }
    }
}

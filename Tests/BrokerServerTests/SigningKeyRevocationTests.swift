import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Storage
import Testing

@testable import BrokerApplication
@testable import BrokerServer

/// Issue 25: `broker keys revoke` removes a compromised signing key from the JWKS at once, the
/// access tokens it signed stop verifying, and sessions stay and get tokens from another key.
@Suite struct SigningKeyRevocationTests {
    typealias S = ProviderTestSetup
    typealias L = LinkingRequests

    /// The `kid` in a compact JWS's header.
    static func kid(of token: String) throws -> String? {
        let header = try #require(token.split(separator: ".").first.flatMap { Base64URL.decode(String($0)) })
        let fields = try JSONSerialization.jsonObject(with: header) as? [String: Any]
        return fields?["kid"] as? String
    }

    static func published(_ setup: S) async throws -> Set<String> {
        let response = try await setup.client.execute(uri: "/t/acme/.well-known/jwks.json", method: .get)
        #expect(response.status == .ok)
        let keys = try #require(try response.json()["keys"] as? [[String: Any]])
        return Set(keys.compactMap { $0["kid"] as? String })
    }

    @Test func revokingTheActiveKeyUnpublishesItAndItsTokensWhileSessionsGoOn() async throws {
        try await L.run { setup in
            let person = try await L.signInWithApple(setup, subject: "001.revoked-key")
            let compromised = try #require(try Self.kid(of: person.accessToken))
            #expect(try await AccountRequests.introspect(setup, person.accessToken) == true)

            // No key is pending: a new one is made, active at once.
            let revocation = try await setup.app.keys.revoke(tenant: "acme", kid: compromised)
            #expect(!revocation.alreadyRevoked)
            let successor = try #require(revocation.successor)
            #expect(successor.state == .active)
            #expect(revocation.keys.first { $0.record.kid == compromised }?.state == .revoked)

            // Every instance drops the key on the notification; this one within the test's bound.
            #expect(try await eventually { try await AccountRequests.introspect(setup, person.accessToken) == false })
            #expect(try await Self.published(setup) == [successor.record.kid])

            // The session stays: its refresh token rotates, and the new access token is the successor's.
            let refreshed = try await AccountRequests.refresh(setup, person.refreshToken)
            #expect(refreshed.status == .ok, "\(String(buffer: refreshed.body))")
            let access = try #require(try refreshed.json()["access_token"] as? String)
            #expect(try Self.kid(of: access) == successor.record.kid)
            #expect(try await AccountRequests.introspect(setup, access) == true)

            // A second revocation changes nothing; the audit log holds one, naming the successor.
            let again = try await setup.app.keys.revoke(tenant: "acme", kid: compromised)
            #expect(again.alreadyRevoked && again.successor == nil)
            let audit = try await setup.app.database.auditLog.entries(tenantID: setup.tenant.id).filter {
                $0.action == "signing_key.revoke"
            }
            #expect(audit.count == 1)
            #expect(audit.first?.target == compromised)
        }
    }

    @Test func revokingTheActiveKeyPromotesThePendingOneAndANextKeyJustLeaves() async throws {
        try await L.run { setup in
            let first = try #require(try await setup.app.keys.list(tenant: "acme").first { $0.state == .active })
            let pending = try await setup.app.keys.rotate(tenant: "acme")
            #expect(pending.state == .next)

            let revocation = try await setup.app.keys.revoke(tenant: "acme", kid: first.record.kid)
            #expect(revocation.successor?.record.kid == pending.record.kid)
            #expect(revocation.successor?.state == .active)
            #expect(revocation.keys.count == 2, "no key made when one was pending")
            #expect(try await eventually { try await Self.published(setup) == [pending.record.kid] })
            let person = try await L.signInWithApple(setup, subject: "001.after-revocation")
            #expect(try Self.kid(of: person.accessToken) == pending.record.kid)

            // A `next` key is revoked without a successor: the active key keeps signing.
            let later = try await setup.app.keys.rotate(tenant: "acme")
            let unpublished = try await setup.app.keys.revoke(tenant: "acme", kid: later.record.kid)
            #expect(unpublished.successor == nil)
            #expect(unpublished.keys.first { $0.record.kid == pending.record.kid }?.state == .active)
            #expect(try await eventually { try await Self.published(setup) == [pending.record.kid] })

            await #expect(throws: BrokerError.self) { try await setup.app.keys.revoke(tenant: "acme", kid: "no-such-kid") }
        }
    }
}

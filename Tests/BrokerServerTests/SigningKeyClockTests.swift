import BrokerCore
import Foundation
import Synchronization
import TestSupport
import Testing

@testable import BrokerApplication
@testable import BrokerServer

/// A wall clock that moves only when told.
final class AdvancingDate: Sendable {
    private let date = Mutex(Date())

    var now: Date { date.withLock { $0 } }

    func advance(by seconds: TimeInterval) { date.withLock { $0 += seconds } }

    var reader: @Sendable () -> Date { { self.now } }
}

/// ``TenantSigningKeys`` on test clocks: the reload interval runs on one, the key states of a
/// load are read at the other, so a rotation and a retired key's end of publication are seen
/// without waiting.
@Suite struct SigningKeyClockTests {
    static func kid(_ jwt: String) throws -> String? {
        let header = try #require(jwt.split(separator: ".").first.flatMap { Base64URL.decode(String($0)) })
        return try (JSONSerialization.jsonObject(with: header) as? [String: Any])?["kid"] as? String
    }

    @Test func aRotationIsSeenAfterTheReloadIntervalAndARetiredKeyLeavesAfterItsPublication() async throws {
        try await TestApp.run { app, _ in
            let tenant = try await app.createTenant("acme")
            let wall = AdvancingDate()
            let instants = AdvancingClock()
            let keys = TenantSigningKeys(
                database: app.database, secrets: app.secrets, ttl: .seconds(30), now: wall.reader, clock: instants.reader)
            let tokens = SessionTokens(keys: keys, publicURL: TestApp.publicURL)
            let sign = { @Sendable () async throws -> String in
                try await tokens.accessToken(
                    tenant: tenant, accountID: UUID(), sessionID: UUID(), idp: "apple", clientID: nil, now: wall.now
                ).token
            }
            let first = try await sign()
            let firstKid = try Self.kid(first)

            // The next key signs a minute after the rotation.
            let rotated = try await app.keys.rotate(tenant: "acme", delay: 60, now: wall.now)
            wall.advance(by: 120)
            #expect(try Self.kid(try await sign()) == firstKid, "the keys loaded before the rotation stand for the interval")
            instants.advance(by: .seconds(30))
            let second = try await sign()
            #expect(try Self.kid(second) == rotated.record.kid, "reloaded: the new key signs")
            #expect(await tokens.verifyAccessToken(first, tenant: tenant) != nil, "the retired key is still published")

            // Published for a day after it stopped signing, then gone at the next reload.
            wall.advance(by: SigningKeyRing.retiredKeyPublication)
            #expect(await tokens.verifyAccessToken(first, tenant: tenant) != nil)
            instants.advance(by: .seconds(30))
            #expect(await tokens.verifyAccessToken(first, tenant: tenant) == nil)
            #expect(await tokens.verifyAccessToken(second, tenant: tenant) != nil)
        }
    }

    /// A load that an invalidation overtook may hold the keys from before the change it
    /// announced: it answers the request that waited for it, and is not kept. The load waits on
    /// a table lock while the invalidation comes; a key added after it (with no notice of its
    /// own) shows at the next call only if the overtaken load was not kept.
    @Test func aLoadAnInvalidationOvertookIsUsedOnceNotKept() async throws {
        try await TestApp.run { app, _ in
            let tenant = try await app.createTenant("acme")
            let keys = TenantSigningKeys(database: app.database, secrets: app.secrets, ttl: .seconds(3_600))
            _ = try await whileReadWaitsOnTable("signing_keys", in: app) {
                try await keys.verifier(for: tenant)
            } meanwhile: {
                keys.invalidate(tenant.id)
            }

            let rotated = try await app.keys.rotate(tenant: "acme", delay: 0, now: Date())
            let (_, signing) = try await keys.signer(for: tenant, now: Date().addingTimeInterval(1))
            #expect(signing == rotated.record.kid, "loaded again: the overtaken load was not kept")
        }
    }
}

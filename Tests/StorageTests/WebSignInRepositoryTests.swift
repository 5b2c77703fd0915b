import BrokerCore
import Foundation
import PostgresNIO
import Storage
import TestSupport
import Testing

/// States and broker codes of the web flow (decision 0038): a state is taken once, in the
/// statement that keeps the sign-in under its code; expired ones answer as unknown; a code is
/// taken once and only for its own tenant and provider; the sweep removes what expired.
@Suite struct WebSignInRepositoryTests {
    func hash(_ byte: UInt8) -> Data { Data(repeating: byte, count: 32) }

    func state(_ byte: UInt8, tenantID: UUID, expiresAt: Date) -> WebSignInState {
        WebSignInState(
            stateHash: hash(byte), tenantID: tenantID, provider: "apple", clientID: "com.acme.web",
            redirectURI: "https://id.example.com/apple/callback", returnURL: "https://acme.example.com/done", intent: .auto,
            callerState: "caller", expiresAt: expiresAt)
    }

    @Test func aStateIsTakenOnceWithItsGrantAndAnExpiredOneIsUnknown() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("acme", in: database)
            let now = Date()
            try await database.webSignIns.createState(state(1, tenantID: tenant.id, expiresAt: now.addingTimeInterval(600)))
            try await database.webSignIns.createState(state(2, tenantID: tenant.id, expiresAt: now.addingTimeInterval(-1)))
            let found = try await database.webSignIns.findState(hash: hash(1), now: now)
            #expect(found?.tenantID == tenant.id)
            #expect(found?.callerState == "caller")
            #expect(found?.intent == .auto)
            #expect(try await database.webSignIns.findState(hash: hash(2), now: now) == nil, "expired")
            #expect(try await database.webSignIns.findState(hash: hash(3), now: now) == nil, "unknown")

            let expiry = now.addingTimeInterval(60)
            #expect(try await database.webSignIns.takeState(hash: hash(1), keepingGrant: Data([7]), codeHash: hash(9), codeExpiresAt: expiry, now: now))
            #expect(try await database.webSignIns.findState(hash: hash(1), now: now) == nil, "taken")
            // A second callback with the state keeps nothing.
            #expect(try await !database.webSignIns.takeState(hash: hash(1), keepingGrant: Data([8]), codeHash: hash(10), codeExpiresAt: expiry, now: now))
            #expect(try await !database.webSignIns.takeState(hash: hash(2), keepingGrant: Data([8]), codeHash: hash(11), codeExpiresAt: expiry, now: now))
            #expect(try await database.webSignIns.takeGrant(codeHash: hash(10), tenantID: tenant.id, provider: "apple", now: now) == nil)
            #expect(try await database.webSignIns.takeGrant(codeHash: hash(9), tenantID: tenant.id, provider: "apple", now: now) == Data([7]))
        }
    }

    @Test func aCodeIsTakenOnlyByItsTenantAndProvider() async throws {
        try await TestDatabase.withFresh { database, _ in
            let acme = try await TestDatabase.createTenant("acme", in: database)
            let bravo = try await TestDatabase.createTenant("bravo", in: database)
            let now = Date()
            try await database.webSignIns.createState(state(1, tenantID: acme.id, expiresAt: now.addingTimeInterval(600)))
            #expect(
                try await database.webSignIns.takeState(
                    hash: hash(1), keepingGrant: Data([1, 2, 3]), codeHash: hash(9), codeExpiresAt: now.addingTimeInterval(60), now: now))
            #expect(try await database.webSignIns.takeGrant(codeHash: hash(9), tenantID: bravo.id, provider: "apple", now: now) == nil)
            #expect(try await database.webSignIns.takeGrant(codeHash: hash(9), tenantID: acme.id, provider: "line", now: now) == nil)
            #expect(try await database.webSignIns.takeGrant(codeHash: hash(9), tenantID: acme.id, provider: "apple", now: now.addingTimeInterval(61)) == nil,
                "expired: removed, nothing returned")
            #expect(try await database.webSignIns.takeGrant(codeHash: hash(9), tenantID: acme.id, provider: "apple", now: now) == nil)
        }
    }

    @Test func theSweepRemovesWhatExpired() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("acme", in: database)
            let now = Date()
            try await database.webSignIns.createState(state(1, tenantID: tenant.id, expiresAt: now.addingTimeInterval(-5)))
            try await database.webSignIns.createState(state(2, tenantID: tenant.id, expiresAt: now.addingTimeInterval(600)))
            try await database.webSignIns.createState(state(3, tenantID: tenant.id, expiresAt: now.addingTimeInterval(600)))
            #expect(
                try await database.webSignIns.takeState(
                    hash: hash(3), keepingGrant: Data([0]), codeHash: hash(4), codeExpiresAt: now.addingTimeInterval(-1), now: now))
            #expect(try await database.webSignIns.deleteExpired(before: now) == 2)
            #expect(try await database.webSignIns.findState(hash: hash(2), now: now) != nil, "a live state stays")
        }
    }
}

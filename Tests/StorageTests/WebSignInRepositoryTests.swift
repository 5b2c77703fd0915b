import BrokerCore
import Foundation
import PostgresNIO
import Storage
import TestSupport
import Testing

/// States and broker codes of the web flow (decision 0038): taken once, expired ones answer as
/// unknown, a code only for its own tenant and provider, and the sweep removes what expired.
@Suite struct WebSignInRepositoryTests {
    func hash(_ byte: UInt8) -> Data { Data(repeating: byte, count: 32) }

    func state(_ byte: UInt8, tenantID: UUID, expiresAt: Date) -> WebSignInState {
        WebSignInState(
            stateHash: hash(byte), tenantID: tenantID, provider: "apple", clientID: "com.acme.web",
            redirectURI: "https://id.example.com/apple/callback", returnURL: "https://acme.example.com/done", intent: .auto,
            callerState: "caller", expiresAt: expiresAt)
    }

    @Test func aStateIsTakenOnceAndAnExpiredOneIsUnknown() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("acme", in: database)
            let now = Date()
            let live = state(1, tenantID: tenant.id, expiresAt: now.addingTimeInterval(600))
            try await database.webSignIns.createState(live)
            try await database.webSignIns.createState(state(2, tenantID: tenant.id, expiresAt: now.addingTimeInterval(-1)))
            let taken = try await database.webSignIns.takeState(hash: hash(1), now: now)
            #expect(taken?.tenantID == tenant.id)
            #expect(taken?.callerState == "caller")
            #expect(taken?.intent == .auto)
            #expect(try await database.webSignIns.takeState(hash: hash(1), now: now) == nil, "single use")
            #expect(try await database.webSignIns.takeState(hash: hash(2), now: now) == nil, "expired")
            #expect(try await database.webSignIns.takeState(hash: hash(3), now: now) == nil, "unknown")
        }
    }

    @Test func aCodeIsTakenOnlyByItsTenantAndProvider() async throws {
        try await TestDatabase.withFresh { database, _ in
            let acme = try await TestDatabase.createTenant("acme", in: database)
            let bravo = try await TestDatabase.createTenant("bravo", in: database)
            let now = Date()
            try await database.webSignIns.storeGrant(
                codeHash: hash(9), tenantID: acme.id, provider: "apple", sealed: Data([1, 2, 3]), expiresAt: now.addingTimeInterval(60))
            #expect(try await database.webSignIns.takeGrant(codeHash: hash(9), tenantID: bravo.id, provider: "apple", now: now) == nil)
            #expect(try await database.webSignIns.takeGrant(codeHash: hash(9), tenantID: acme.id, provider: "line", now: now) == nil)
            #expect(try await database.webSignIns.takeGrant(codeHash: hash(9), tenantID: acme.id, provider: "apple", now: now) == Data([1, 2, 3]))
            #expect(try await database.webSignIns.takeGrant(codeHash: hash(9), tenantID: acme.id, provider: "apple", now: now) == nil)
        }
    }

    @Test func theSweepRemovesWhatExpired() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("acme", in: database)
            let now = Date()
            try await database.webSignIns.createState(state(1, tenantID: tenant.id, expiresAt: now.addingTimeInterval(-5)))
            try await database.webSignIns.createState(state(2, tenantID: tenant.id, expiresAt: now.addingTimeInterval(600)))
            try await database.webSignIns.storeGrant(
                codeHash: hash(3), tenantID: tenant.id, provider: "apple", sealed: Data([0]), expiresAt: now.addingTimeInterval(-1))
            #expect(try await database.webSignIns.deleteExpired(before: now) == 2)
            #expect(try await database.webSignIns.takeState(hash: hash(2), now: now) != nil, "a live state stays")
        }
    }
}

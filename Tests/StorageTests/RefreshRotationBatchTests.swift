import BrokerCore
import Foundation
import PostgresNIO
import TestSupport
import Testing

@testable import Storage

/// Refresh rotations in batches (decision 0074): a batch rotates each of its tokens as that
/// token's rotation alone would, row for row, whatever the other elements are; two refreshes of
/// one session in a batch rotate once, and the other is the repeat it would be had it lost the
/// row lock; an element that fails the statement fails alone.
@Suite struct RefreshRotationBatchTests {
    /// The states a presented token's session can be in.
    enum State: String, CaseIterable {
        case live
        case wrongToken = "wrong token"
        case idleExpired = "token past its idle expiry"
        case sessionExpired = "session past its absolute expiry"
        case revoked = "session revoked"
        case accountDisabled = "account disabled"
        case otherTenant = "token presented to another tenant"
        case unknownSession = "no such session"

        var rotates: Bool { self == .live }
    }

    /// One session in `state`, and the rotation that presents its token.
    struct Case {
        let state: State
        let session: UUID
        let posted: SessionRepository.PostedRotation
    }

    /// A token hash of its own (32 random bytes).
    static func newHash() -> Data { Data((0..<32).map { _ in UInt8.random(in: 0...255) }) }

    /// Opens a session for a new person of `tenant` (refresh token `token`), puts it in `state`,
    /// and makes the rotation of that token.
    static func makeCase(
        _ state: State, label: String, tenant: UUID, other: UUID, database: Database
    ) async throws -> Case {
        let token = newHash()
        let request = SignInRequest(
            tenantID: tenant,
            identity: ProviderIdentity(
                provider: .apple, providerScope: "TEAM000001", subject: "001234.\(label)", email: nil, emailVerified: false,
                isPrivateEmail: false, name: PersonName(givenName: nil, familyName: nil)),
            sealedProviderRefreshToken: nil, intent: .auto, clientID: "com.acme.app", platform: nil,
            session: NewSession(
                id: UUID(), refreshTokenHash: token, expiresAt: Date().addingTimeInterval(3_600),
                refreshTokenExpiresAt: Date().addingTimeInterval(1_800)))
        let result = try #require(try await database.accounts.signIn(request))
        let session = result.sessionID
        switch state {
        case .live, .wrongToken, .otherTenant, .unknownSession: break
        case .idleExpired:
            _ = try await database.client.query(
                "UPDATE sessions SET refresh_token_expires_at = now() - interval '1 second' WHERE id = \(session)")
        case .sessionExpired:
            _ = try await database.client.query("UPDATE sessions SET expires_at = now() - interval '1 second' WHERE id = \(session)")
        case .revoked:
            _ = try await database.client.query("UPDATE sessions SET revoked_at = now(), revoke_reason = 'test' WHERE id = \(session)")
        case .accountDisabled:
            _ = try await database.client.query("UPDATE accounts SET status = 'disabled' WHERE id = \(result.account.id)")
        }
        let rotation = SessionRepository.Rotation(
            tenantID: state == .otherTenant ? other : tenant, tokenHash: state == .wrongToken ? newHash() : token,
            successorHash: newHash(), spentID: .timeOrdered(), idleLifetime: 600)
        let presented = state == .unknownSession ? UUID() : session
        return Case(state: state, session: presented, posted: .init(rotation: rotation, sessionID: presented))
    }

    /// What a rotation left on its session and in the ledger, in terms that do not depend on
    /// ids or the moment: whether the session holds the successor (or still the token), its
    /// idle expiry against now, and the ledger rows of the session.
    struct Written: Equatable, CustomStringConvertible {
        let holdsSuccessor: Bool
        let holdsToken: Bool
        let idleExpiryInMinutes: Int
        let ledger: [String]
        var description: String { "successor \(holdsSuccessor), token \(holdsToken), idle \(idleExpiryInMinutes) min, ledger \(ledger)" }
    }

    static func written(_ item: Case, database: Database) async throws -> Written {
        let rotation = item.posted.rotation
        let rows = try await database.client.query(
            """
            SELECT s.refresh_token_hash = \(rotation.successorHash), s.refresh_token_hash = \(rotation.tokenHash),
                round(extract(epoch FROM s.refresh_token_expires_at - now()) / 60)::int8
            FROM sessions s WHERE s.id = \(item.posted.sessionID)
            """)
        var session: (Bool, Bool, Int) = (false, false, 0)
        for try await row in rows.decode((Bool, Bool, Int).self) { session = row }
        let ledgerRows = try await database.client.query(
            """
            SELECT encode(token_hash, 'hex') || ' ' || (tenant_id = \(rotation.tenantID))::text || ' '
                || (used_at IS NOT NULL)::text || ' ' || round(extract(epoch FROM expires_at - now()) / 60)::text
            FROM refresh_tokens WHERE session_id = \(item.posted.sessionID) ORDER BY created_at
            """)
        var ledger: [String] = []
        for try await line in ledgerRows.decode(String.self) { ledger.append(line) }
        return Written(holdsSuccessor: session.0, holdsToken: session.1, idleExpiryInMinutes: session.2, ledger: ledger)
    }

    /// Every state, rotated alone and in a batch with every other state (in an order that puts
    /// the same state at different positions), returns the same outcome and writes the same.
    @Test(arguments: [false, true]) func aBatchRotatesEachTokenAsItsRotationAloneWould(reversed: Bool) async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("batch", in: database)
            let other = try await TestDatabase.createTenant("other", in: database)
            var alone: [Case] = []
            var batched: [Case] = []
            for state in State.allCases {
                alone.append(
                    try await Self.makeCase(state, label: "alone.\(state)", tenant: tenant.id, other: other.id, database: database))
                batched.append(
                    try await Self.makeCase(state, label: "batch.\(state)", tenant: tenant.id, other: other.id, database: database))
            }
            if reversed { batched.reverse() }
            var aloneOutcomes: [SessionRepository.SessionInfo?] = []
            for item in alone {
                aloneOutcomes.append(try await SessionRepository.rotate([item.posted], client: database.client, logger: database.logger)[0])
            }
            let batchOutcomes = try await SessionRepository.rotate(batched.map(\.posted), client: database.client, logger: database.logger)
            #expect(batchOutcomes.count == batched.count)
            for (index, item) in alone.enumerated() {
                let partner = try #require(batched.firstIndex { $0.state == item.state })
                let (a, b) = (aloneOutcomes[index], batchOutcomes[partner])
                #expect((a != nil) == item.state.rotates, "\(item.state) alone")
                #expect((b != nil) == item.state.rotates, "\(item.state) in a batch")
                #expect(a?.sessionID == item.posted.sessionID || a == nil)
                #expect(b?.sessionID == batched[partner].posted.sessionID || b == nil)
                #expect(a?.idp == b?.idp && a?.clientID == b?.clientID)
                let (writtenAlone, writtenBatched) = (
                    try await Self.written(item, database: database), try await Self.written(batched[partner], database: database)
                )
                #expect(writtenAlone.holdsSuccessor == item.state.rotates, "\(item.state): \(writtenAlone)")
                #expect(writtenAlone.ledger.count == (item.state.rotates ? 1 : 0), "\(item.state): \(writtenAlone)")
                // The ledger lines name each token's own hash: compare all but the hash.
                #expect(writtenAlone.holdsSuccessor == writtenBatched.holdsSuccessor, "\(item.state)")
                #expect(writtenAlone.holdsToken == writtenBatched.holdsToken, "\(item.state)")
                #expect(writtenAlone.idleExpiryInMinutes == writtenBatched.idleExpiryInMinutes, "\(item.state)")
                #expect(
                    writtenAlone.ledger.map { $0.split(separator: " ").dropFirst() }
                        == writtenBatched.ledger.map { $0.split(separator: " ").dropFirst() },
                    "\(item.state): \(writtenAlone) against \(writtenBatched)")
            }
        }
    }

    /// Two rotations of one session in one batch: the first rotates; the second rotates nothing
    /// and writes nothing, as when it loses the row lock to the first.
    @Test func aSecondRotationOfOneSessionInABatchRotatesNothing() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("twice", in: database)
            let item = try await Self.makeCase(.live, label: "twice", tenant: tenant.id, other: tenant.id, database: database)
            var again = item.posted
            again = .init(
                rotation: .init(
                    tenantID: again.rotation.tenantID, tokenHash: again.rotation.tokenHash, successorHash: Self.newHash(),
                    spentID: .timeOrdered(), idleLifetime: 600),
                sessionID: again.sessionID)
            let outcomes = try await SessionRepository.rotate([item.posted, again], client: database.client, logger: database.logger)
            #expect(outcomes[0]?.sessionID == item.session)
            #expect(outcomes[1] == nil)
            let written = try await Self.written(item, database: database)
            #expect(written.holdsSuccessor && written.ledger.count == 1)
        }
    }

    /// The same token refreshed twice at once through the repository, many times behind a
    /// barrier: one rotation and one repeat with the same successor, one ledger row, the session
    /// live. The two land in one batch or in two, as they come.
    @Test func concurrentRefreshesOfOneTokenRotateOnceAndRepeatOnce() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("race", in: database)
            for round in 0..<25 {
                let item = try await Self.makeCase(.live, label: "race.\(round)", tenant: tenant.id, other: tenant.id, database: database)
                let rotation = item.posted.rotation
                let outcomes = try await withThrowingTaskGroup(of: SessionRepository.RefreshOutcome.self) { group in
                    for _ in 0..<2 {
                        group.addTask {
                            try await database.sessions.refresh(
                                tenantID: rotation.tenantID, tokenHash: rotation.tokenHash, sessionID: item.session,
                                successorHash: rotation.successorHash, idleLifetime: 600, reuseInterval: 10)
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                let rotated = outcomes.filter { if case .rotated = $0 { true } else { false } }
                let repeated = outcomes.filter { if case .repeated = $0 { true } else { false } }
                #expect(rotated.count == 1 && repeated.count == 1, "round \(round): \(outcomes)")
                let written = try await Self.written(item, database: database)
                #expect(written.holdsSuccessor && written.ledger.count == 1, "round \(round): \(written)")
            }
        }
    }

    /// An element whose ledger row cannot be written (its spent id taken) fails alone; the
    /// others of its batch rotate.
    @Test func anElementThatFailsTheStatementFailsAlone() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("alone", in: database)
            var items: [Case] = []
            for index in 0..<3 {
                items.append(
                    try await Self.makeCase(.live, label: "alone.\(index)", tenant: tenant.id, other: tenant.id, database: database))
            }
            // A ledger row that holds the second element's spent id already.
            let taken = items[0]
            _ = try await SessionRepository.rotate([taken.posted], client: database.client, logger: database.logger)
            let clash = SessionRepository.PostedRotation(
                rotation: .init(
                    tenantID: items[1].posted.rotation.tenantID, tokenHash: items[1].posted.rotation.tokenHash,
                    successorHash: items[1].posted.rotation.successorHash, spentID: taken.posted.rotation.spentID, idleLifetime: 600),
                sessionID: items[1].session)
            let results = try await BatchElements.failingAlone([clash, items[2].posted]) {
                try await SessionRepository.rotate($0, client: database.client, logger: database.logger)
            }
            #expect(throws: PSQLError.self) { try results[0].get() }
            #expect(try results[1].get()?.sessionID == items[2].session)
            #expect(try await Self.written(items[1], database: database).ledger.isEmpty)
            #expect(try await Self.written(items[1], database: database).holdsToken)
        }
    }
}

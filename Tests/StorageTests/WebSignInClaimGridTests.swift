import BrokerCore
import Foundation
import PostgresNIO
@testable import Storage
import TestSupport
import Testing

/// Decision 0099: a sealed state is claimed by a statement of its own, which writes the row on
/// its first claim; it is built from the same fragments as the claim of a stored state. This
/// grid runs both over every situation a row can be in, behind the tenant wall, and requires the
/// same answer and the same row afterwards; then the one situation they differ in by design (no
/// row yet), and a race of callbacks with one sealed state. Decision 0102: sealed claims that
/// arrive together go in one statement, each element answering as a lone claim would.
@Suite struct WebSignInClaimGridTests {
    struct Situation: Sendable, CustomStringConvertible {
        let description: String
        /// What the row's columns are set to before the claim (SQL, an `UPDATE ... SET`'s list).
        let set: String?
        let claimed: Bool
    }

    /// Times a minute or more from now: the test's `now` is whole seconds, up to one behind the
    /// database's.
    static let situations: [Situation] = [
        Situation(description: "unclaimed", set: nil, claimed: true),
        Situation(description: "claimed by a callback in flight", set: "claimed_until = now() + interval '1 hour'", claimed: false),
        Situation(description: "a claim that lapsed", set: "claimed_until = now() - interval '1 minute'", claimed: true),
        Situation(description: "answered with a code", set: "code_issued = true", claimed: false),
        Situation(description: "answered with an error", set: "error = 'provider_refused'", claimed: false),
        Situation(description: "expired", set: "expires_at = now() - interval '1 minute'", claimed: false),
        Situation(
            description: "expired while claimed, with a lapsed claim",
            set: "expires_at = now() - interval '1 minute', claimed_until = now() - interval '2 minutes'", claimed: false),
    ]

    /// Now in whole seconds: what PostgreSQL keeps (microseconds) reads back equal.
    static func now() -> Date { Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down)) }

    static let rowColumns = """
        tenant_id::text, provider, client_id, redirect_uri, return_url, intent, caller_state, expires_at::text, provider_scope,
        oauth_client_id, oauth_request, claimed_until::text, code_issued, error
        """

    func state(_ byte: UInt8, tenantID: UUID, now: Date, relyingParty: Bool) -> WebSignInState {
        WebSignInState(
            stateHash: Data(repeating: byte, count: 32), tenantID: tenantID, provider: "apple", clientID: "com.acme.web",
            redirectURI: "https://id.example.com/apple/callback", returnURL: "https://acme.example.com/done?x=\"'<", intent: .signUp,
            callerState: relyingParty ? nil : "caller é", expiresAt: now.addingTimeInterval(600), providerScope: "TEAM000001",
            relyingParty: relyingParty
                ? WebSignInState.RelyingParty(
                    clientID: "web",
                    request: KeptClientRequest(issuer: "https://id.example.com/t/acme", scopes: [.openid], nonce: "n", codeChallenge: "c"))
                : nil)
    }

    /// The row of `hash` as text, column by column; nil when there is none.
    func row(_ hash: Data, _ admin: Database) async throws -> [String?]? {
        let rows = try await admin.client.query(
            PostgresQuery(unsafeSQL: "SELECT \(Self.rowColumns) FROM web_sign_in_states WHERE state_hash = $1", binds: try binds(hash)),
            logger: TestDatabase.logger)
        for try await row in rows {
            var values: [String?] = []
            for cell in row {
                values.append(cell.bytes.map { String(buffer: $0) })
            }
            return values
        }
        return nil
    }

    func binds(_ hash: Data) throws -> PostgresBindings {
        var binds = PostgresBindings()
        try binds.append(hash)
        return binds
    }

    @Test(arguments: situations, [false, true])
    func bothClaimsAnswerAlikeInEverySituation(situation: Situation, relyingParty: Bool) async throws {
        try await TestDatabase.withFreshServing { admin, serving, _ in
            let tenant = try await TestDatabase.createTenant("acme", in: admin)
            let now = Self.now()
            let until = now.addingTimeInterval(30)
            let (stored, sealed) = (
                state(1, tenantID: tenant.id, now: now, relyingParty: relyingParty),
                state(2, tenantID: tenant.id, now: now, relyingParty: relyingParty)
            )
            try await admin.webSignIns.createState(stored)
            try await admin.webSignIns.createState(sealed)
            if let set = situation.set {
                _ = try await admin.client.query(
                    PostgresQuery(unsafeSQL: "UPDATE web_sign_in_states SET \(set)"), logger: TestDatabase.logger)
            }
            let states = serving.webSignIns
            let byStored = try await TenantScope.tenant(tenant.id) {
                try await states.claimState(hash: stored.stateHash, tenantID: tenant.id, now: now, claimUntil: until, subject: "001.x")
            }
            let bySealed = try await states.claimSealedState(sealed, now: now, claimUntil: until, subject: "001.x")
            #expect((byStored != nil) == situation.claimed, "\(situation)")
            #expect((bySealed != nil) == situation.claimed, "\(situation)")
            var renamed = bySealed?.state
            renamed?.stateHash = stored.stateHash
            #expect(renamed == byStored?.state, "\(situation)")
            #expect(bySealed?.account == byStored?.account, "\(situation)")
            if situation.claimed { #expect(byStored?.state.relyingParty == stored.relyingParty) }
            let (storedRow, sealedRow) = (try await row(stored.stateHash, admin), try await row(sealed.stateHash, admin))
            #expect(storedRow != nil)
            #expect(storedRow == sealedRow, "\(situation): the same row afterwards")
        }
    }

    /// Decision 0102: every situation of the grid at once in one batch, beside a twin of each
    /// state claimed alone; with them a state that has no row yet, one that expired before its
    /// row was written, and one state twice. Each element answers as its twin did alone (the
    /// subject's lookup its own), and leaves the same row; the second of the same state is not
    /// claimed, as a double submit a moment later is not.
    @Test(arguments: [false, true])
    func aBatchOfClaimsAnswersEachAsALoneClaimWould(relyingParty: Bool) async throws {
        try await TestDatabase.withFreshServing { admin, serving, _ in
            let tenant = try await TestDatabase.createTenant("acme", in: admin)
            let now = Self.now()
            let until = now.addingTimeInterval(30)
            // (the twin claimed alone, the element of the batch, the subject)
            var pairs: [(lone: WebSignInState, batched: WebSignInState, subject: String?)] = []
            for (i, situation) in Self.situations.enumerated() {
                let pair = (
                    state(UInt8(50 + i), tenantID: tenant.id, now: now, relyingParty: relyingParty),
                    state(UInt8(80 + i), tenantID: tenant.id, now: now, relyingParty: relyingParty)
                )
                try await admin.webSignIns.createState(pair.0)
                try await admin.webSignIns.createState(pair.1)
                if let set = situation.set {
                    var binds = try binds(pair.0.stateHash)
                    try binds.append(pair.1.stateHash)
                    _ = try await admin.client.query(
                        PostgresQuery(unsafeSQL: "UPDATE web_sign_in_states SET \(set) WHERE state_hash IN ($1, $2)", binds: binds),
                        logger: TestDatabase.logger)
                }
                pairs.append((pair.0, pair.1, i.isMultiple(of: 2) ? "001.x" : nil))
            }
            let unwritten = (
                state(120, tenantID: tenant.id, now: now, relyingParty: relyingParty),
                state(121, tenantID: tenant.id, now: now, relyingParty: relyingParty)
            )
            pairs.append((unwritten.0, unwritten.1, "001.y"))
            var expired = (
                state(122, tenantID: tenant.id, now: now, relyingParty: relyingParty),
                state(123, tenantID: tenant.id, now: now, relyingParty: relyingParty)
            )
            expired.0.expiresAt = now
            expired.1.expiresAt = now
            pairs.append((expired.0, expired.1, nil))

            let client = serving.client
            let logger = TestDatabase.logger
            let claims = try await TenantScope.tenant(tenant.id) {
                var lone: [WebSignInRepository.ClaimStateStatement.Row?] = []
                for pair in pairs {
                    let claim = SealedClaim(state: pair.lone, now: now, claimUntil: until, subject: pair.subject)
                    lone.append(try await WebSignInRepository.claimSealed([claim], client: client, logger: logger)[0])
                }
                // The batch in another order than the twins', the unwritten state twice.
                var batch = pairs.reversed().map { SealedClaim(state: $0.batched, now: now, claimUntil: until, subject: $0.subject) }
                batch.append(SealedClaim(state: unwritten.1, now: now, claimUntil: until, subject: "001.y"))
                let batched = try await WebSignInRepository.claimSealed(batch, client: client, logger: logger)
                return (lone, batched)
            }
            let batched = Array(claims.1.prefix(pairs.count).reversed())
            #expect(claims.1.count == pairs.count + 1)
            #expect(claims.1.last.flatMap { $0 } == nil, "the same state a second time in the batch: not claimed")
            for (n, pair) in pairs.enumerated() {
                let (lone, inBatch) = (claims.0[n], batched[n])
                #expect((lone != nil) == (inBatch != nil), "element \(n)")
                var renamed = inBatch?.state
                renamed?.stateHash = pair.lone.stateHash
                #expect(renamed == lone?.state, "element \(n)")
                #expect(inBatch?.account == lone?.account, "element \(n)")
                let (loneRow, batchedRow) = (try await row(pair.lone.stateHash, admin), try await row(pair.batched.stateHash, admin))
                #expect(loneRow == batchedRow, "element \(n): the same row")
            }
            #expect(claims.0[pairs.count - 2]?.account == SubjectAccountStatus(subject: "001.y", status: nil))
            #expect(claims.0[pairs.count - 1] == nil, "expired: not claimed")
            #expect(try await row(expired.1.stateHash, admin) == nil, "expired: nothing written")
            #expect(try await row(unwritten.1.stateHash, admin) != nil)
        }
    }

    /// The one difference, by design: a sealed state's first claim writes its row (unless it
    /// expired); a stored state without a row is unknown.
    @Test func aSealedStatesFirstClaimWritesItsRow() async throws {
        try await TestDatabase.withFreshServing { admin, serving, _ in
            let tenant = try await TestDatabase.createTenant("acme", in: admin)
            let now = Self.now()
            let until = now.addingTimeInterval(30)
            let sealed = state(3, tenantID: tenant.id, now: now, relyingParty: true)
            let states = serving.webSignIns
            #expect(
                try await TenantScope.tenant(tenant.id) {
                    try await states.claimState(hash: sealed.stateHash, tenantID: tenant.id, now: now, claimUntil: until, subject: nil)
                } == nil)
            #expect(try await row(sealed.stateHash, admin) == nil)
            // Expired: neither claimed nor written.
            #expect(
                try await states.claimSealedState(sealed, now: sealed.expiresAt, claimUntil: sealed.expiresAt + 30, subject: nil) == nil)
            #expect(try await row(sealed.stateHash, admin) == nil)
            let claimed = try await states.claimSealedState(sealed, now: now, claimUntil: until, subject: nil)
            #expect(claimed?.state == sealed)
            #expect(claimed?.account == nil, "no subject: not looked up")
            #expect(try await row(sealed.stateHash, admin) != nil)
            // Written, it is a stored state: claimed by a callback in flight, a repeat of which
            // reads it.
            #expect(try await states.claimSealedState(sealed, now: now, claimUntil: until, subject: nil) == nil)
            #expect(
                try await states.repeatOf(hash: sealed.stateHash, tenantID: tenant.id, now: now, codeHash: Data(repeating: 9, count: 32))?
                    .answer == .inFlight)
        }
    }

    /// Callbacks of one sealed state at once (a double submit, a browser's retry): one claims it
    /// and writes its row; every other finds it claimed. Many rounds, behind a barrier.
    @Test func callbacksOfOneSealedStateAtOnceClaimItOnce() async throws {
        try await TestDatabase.withFreshServing { admin, serving, _ in
            let tenant = try await TestDatabase.createTenant("acme", in: admin)
            let now = Self.now()
            let states = serving.webSignIns
            for round: UInt8 in 10..<40 {
                let sealed = state(round, tenantID: tenant.id, now: now, relyingParty: round.isMultiple(of: 2))
                let barrier = Barrier(count: 6)
                let claims = try await withThrowingTaskGroup(of: Bool.self, returning: Int.self) { group in
                    for _ in 0..<6 {
                        group.addTask {
                            await barrier.arrive()
                            return try await states.claimSealedState(
                                sealed, now: now, claimUntil: now.addingTimeInterval(30), subject: "001.x") != nil
                        }
                    }
                    return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
                }
                #expect(claims == 1, "round \(round)")
            }
            let rows = try await admin.client.query("SELECT count(*)::int8 FROM web_sign_in_states", logger: TestDatabase.logger)
            for try await count in rows.decode(Int.self) { #expect(count == 30) }
        }
    }
}

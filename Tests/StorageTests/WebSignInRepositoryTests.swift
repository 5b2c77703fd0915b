import BrokerCore
import Foundation
import PostgresNIO
import Storage
import TestSupport
import Testing

/// States and broker codes of the web flow (decisions 0038, 0069): a state is claimed by one
/// callback at a time and answered once, in the statement that keeps the sign-in under its code
/// or with an error, and a repeat reads what became of it; expired ones answer as unknown; a
/// code is taken once and only for its own tenant and provider; the sweep removes what expired.
@Suite struct WebSignInRepositoryTests {
    func hash(_ byte: UInt8) -> Data { Data(repeating: byte, count: 32) }

    func state(_ byte: UInt8, tenantID: UUID, expiresAt: Date) -> WebSignInState {
        WebSignInState(
            stateHash: hash(byte), tenantID: tenantID, provider: "apple", clientID: "com.acme.web",
            redirectURI: "https://id.example.com/apple/callback", returnURL: "https://acme.example.com/done", intent: .auto,
            callerState: "caller", expiresAt: expiresAt)
    }

    /// Reads a state with a claim that has lapsed by `now` (so the next read claims it again).
    func read(_ byte: UInt8, _ database: Database, now: Date, subject: String? = nil) async throws
        -> (state: WebSignInState, account: SubjectAccountStatus?)?
    {
        try await database.webSignIns.claimState(hash: hash(byte), tenantID: nil, now: now, claimUntil: now, subject: subject)
    }

    @Test func aStateIsTakenOnceWithItsGrantAndAnExpiredOneIsUnknown() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("acme", in: database)
            let now = Date()
            try await database.webSignIns.createState(state(1, tenantID: tenant.id, expiresAt: now.addingTimeInterval(600)))
            try await database.webSignIns.createState(state(2, tenantID: tenant.id, expiresAt: now.addingTimeInterval(-1)))
            let found = try await read(1, database, now: now)?.state
            #expect(found?.tenantID == tenant.id)
            #expect(found?.callerState == "caller")
            #expect(found?.intent == .auto)
            #expect(try await read(2, database, now: now) == nil, "expired")
            #expect(try await read(3, database, now: now) == nil, "unknown")
            #expect(try await database.webSignIns.repeatOf(hash: hash(2), tenantID: nil, now: now, codeHash: hash(9)) == nil, "expired")
            #expect(try await database.webSignIns.repeatOf(hash: hash(3), tenantID: nil, now: now, codeHash: hash(9)) == nil, "unknown")

            let expiry = now.addingTimeInterval(60)
            #expect(
                try await database.webSignIns.takeState(
                    hash: hash(1), tenantID: tenant.id, keepingGrant: Data([7]), codeHash: hash(9), codeExpiresAt: expiry, now: now))
            #expect(try await read(1, database, now: now) == nil, "taken")
            // A second callback with the state keeps nothing.
            #expect(
                try await !database.webSignIns.takeState(
                    hash: hash(1), tenantID: tenant.id, keepingGrant: Data([8]), codeHash: hash(10), codeExpiresAt: expiry, now: now))
            #expect(
                try await !database.webSignIns.takeState(
                    hash: hash(2), tenantID: tenant.id, keepingGrant: Data([8]), codeHash: hash(11), codeExpiresAt: expiry, now: now))
            #expect(try await database.webSignIns.takeGrant(codeHash: hash(10), tenantID: tenant.id, provider: "apple", now: now) == nil)
            #expect(
                try await database.webSignIns.takeGrant(codeHash: hash(9), tenantID: tenant.id, provider: "apple", now: now) == Data([7]))
        }
    }

    /// Issue 39 F16: a second callback with a state another one claimed does not redeem the
    /// provider's code again; it reads what became of the state.
    @Test func aClaimedStateIsInFlightUntilAnsweredOrLapsed() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("acme", in: database)
            let now = Date()
            for byte: UInt8 in 1...2 {
                try await database.webSignIns.createState(state(byte, tenantID: tenant.id, expiresAt: now.addingTimeInterval(600)))
            }
            let repeatOf = { (byte: UInt8, at: Date) in
                try await database.webSignIns.repeatOf(hash: self.hash(byte), tenantID: tenant.id, now: at, codeHash: self.hash(9))
            }
            let claimed = try await database.webSignIns.claimState(
                hash: hash(1), tenantID: tenant.id, now: now, claimUntil: now.addingTimeInterval(10), subject: nil)
            #expect(claimed?.state.tenantID == tenant.id)
            #expect(
                try await database.webSignIns.claimState(
                    hash: hash(1), tenantID: tenant.id, now: now, claimUntil: now.addingTimeInterval(10), subject: nil)
                    == nil)
            let inFlight = try #require(try await repeatOf(1, now))
            #expect(inFlight.answer == .inFlight)
            #expect(
                inFlight.returnURL == "https://acme.example.com/done" && inFlight.callerState == "caller" && inFlight.provider == "apple")
            // The claim's process stopped: at its end the state can be claimed again.
            #expect(try await repeatOf(1, now.addingTimeInterval(10))?.answer == .unclaimed)
            #expect(
                try await database.webSignIns.claimState(
                    hash: hash(1), tenantID: tenant.id, now: now.addingTimeInterval(10), claimUntil: now.addingTimeInterval(20),
                    subject: nil) != nil)

            // Answered with a code: the same code while unexchanged, spent once exchanged.
            #expect(
                try await database.webSignIns.takeState(
                    hash: hash(1), tenantID: tenant.id, keepingGrant: Data([7]), codeHash: hash(9),
                    codeExpiresAt: now.addingTimeInterval(60), now: now))
            #expect(try await repeatOf(1, now)?.answer == .code(unexchanged: true))
            #expect(
                try await database.webSignIns.repeatOf(hash: hash(1), tenantID: tenant.id, now: now, codeHash: hash(8))?.answer
                    == .code(unexchanged: false))
            #expect(
                try await database.webSignIns.takeGrant(codeHash: hash(9), tenantID: tenant.id, provider: "apple", now: now) == Data([7]))
            #expect(try await repeatOf(1, now)?.answer == .code(unexchanged: false))
            #expect(try await read(1, database, now: now.addingTimeInterval(30)) == nil, "an answered state is never claimed again")

            // Answered with an error: once; an answered state keeps its first answer.
            _ = try await read(2, database, now: now)
            try await database.webSignIns.answerState(hash: hash(2), tenantID: tenant.id, error: "provider_refused")
            try await database.webSignIns.answerState(hash: hash(2), tenantID: tenant.id, error: "server_error")
            #expect(try await repeatOf(2, now)?.answer == .error("provider_refused"))
            #expect(
                try await !database.webSignIns.takeState(
                    hash: hash(2), tenantID: tenant.id, keepingGrant: Data([8]), codeHash: hash(10),
                    codeExpiresAt: now.addingTimeInterval(60), now: now))
            try await database.webSignIns.answerState(hash: hash(1), tenantID: tenant.id, error: "server_error")
            #expect(try await repeatOf(1, now)?.answer == .code(unexchanged: false), "a code's state keeps its answer")
        }
    }

    /// A callback's claim whose commit is lost is a failure, and what follows it on the pool
    /// answers right. The claim's commit is made to fail after `CommandComplete` (a deferred
    /// constraint trigger on its update, the way `CommitConfirmationTests` fails an insert), ten
    /// times: the claim fails as unavailable (503, retried), the state stays unclaimed, and the
    /// repeat's read (`repeatOf`, on a new connection: the failed commit closed the claim's)
    /// finds it; once commits go through, each state is claimed and taken. Before `repeatOf` went
    /// through `rows` it was sent straight to PostgresNIO's client: outside any tenant scope on a
    /// new connection (no state found, five rounds of ten) and onto a connection that had closed
    /// (never answered: the deadline).
    @Test func aClaimWhoseCommitIsLostFailsAndThePoolGoesOn() async throws {
        try await TestDatabase.withFreshServing { admin, serving, _ in
            let tenant = try await TestDatabase.createTenant("acme", in: admin)
            let now = Date()
            let refuse: PostgresQuery = """
                CREATE CONSTRAINT TRIGGER claim_refuse AFTER UPDATE ON web_sign_in_states DEFERRABLE INITIALLY DEFERRED
                FOR EACH ROW WHEN (NEW.claimed_until IS NOT NULL AND NOT NEW.code_issued) EXECUTE FUNCTION claim_refuse()
                """
            try await admin.client.query(
                """
                CREATE FUNCTION claim_refuse() RETURNS trigger LANGUAGE plpgsql
                AS $$ BEGIN RAISE EXCEPTION 'claim refused at commit'; END $$
                """, logger: TestDatabase.logger)
            try await admin.client.query(refuse, logger: TestDatabase.logger)
            let states = serving.webSignIns
            let until = now.addingTimeInterval(10)
            for round: UInt8 in 1...10 {
                try await TenantScope.tenant(tenant.id) {
                    try await states.createState(state(round, tenantID: tenant.id, expiresAt: now.addingTimeInterval(600)))
                }
                let error = await #expect(throws: (any Error).self, "round \(round): the claim answered though its commit was lost") {
                    try await withDatabaseDeadline(.seconds(10)) {
                        try await states.claimState(hash: self.hash(round), tenantID: tenant.id, now: now, claimUntil: until, subject: nil)
                    }
                }
                #expect(
                    !(error is DatabaseDeadlineExceeded) && error?.isDatabaseUnavailable == true,
                    "round \(round): \(String(reflecting: error))")
                let unclaimed = try await withDatabaseDeadline(.seconds(10)) {
                    try await states.repeatOf(hash: self.hash(round), tenantID: tenant.id, now: now, codeHash: self.hash(200))
                }
                #expect(unclaimed?.answer == .unclaimed, "round \(round)")
            }
            try await admin.client.query("DROP TRIGGER claim_refuse ON web_sign_in_states", logger: TestDatabase.logger)
            for round: UInt8 in 1...10 {
                let claimed = try await withDatabaseDeadline(.seconds(10)) {
                    try await states.claimState(hash: self.hash(round), tenantID: tenant.id, now: now, claimUntil: until, subject: nil)
                }
                #expect(claimed?.state.tenantID == tenant.id, "round \(round): the state is claimed once the commit goes through")
                let taken = try await withDatabaseDeadline(.seconds(10)) {
                    try await states.takeState(
                        hash: self.hash(round), tenantID: tenant.id, keepingGrant: Data([round]), codeHash: self.hash(100 + round),
                        codeExpiresAt: now.addingTimeInterval(60), now: now)
                }
                #expect(taken, "round \(round)")
            }
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
                    hash: hash(1), tenantID: acme.id, keepingGrant: Data([1, 2, 3]), codeHash: hash(9),
                    codeExpiresAt: now.addingTimeInterval(60), now: now))
            #expect(try await database.webSignIns.takeGrant(codeHash: hash(9), tenantID: bravo.id, provider: "apple", now: now) == nil)
            #expect(try await database.webSignIns.takeGrant(codeHash: hash(9), tenantID: acme.id, provider: "line", now: now) == nil)
            #expect(
                try await database.webSignIns.takeGrant(
                    codeHash: hash(9), tenantID: acme.id, provider: "apple", now: now.addingTimeInterval(61)) == nil,
                "expired: removed, nothing returned")
            #expect(try await database.webSignIns.takeGrant(codeHash: hash(9), tenantID: acme.id, provider: "apple", now: now) == nil)
        }
    }

    @Test func theSweepRemovesWhatExpired() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("acme", in: database)
            let now = Date()
            let kept = WebSignInRepository.expiredStateKept
            try await database.webSignIns.createState(state(1, tenantID: tenant.id, expiresAt: now.addingTimeInterval(-kept - 1)))
            try await database.webSignIns.createState(state(2, tenantID: tenant.id, expiresAt: now.addingTimeInterval(600)))
            try await database.webSignIns.createState(state(3, tenantID: tenant.id, expiresAt: now.addingTimeInterval(600)))
            // Expired, but within the time a state's row stays (decision 0099): kept.
            try await database.webSignIns.createState(state(5, tenantID: tenant.id, expiresAt: now.addingTimeInterval(-kept + 5)))
            #expect(
                try await database.webSignIns.takeState(
                    hash: hash(3), tenantID: tenant.id, keepingGrant: Data([0]), codeHash: hash(4),
                    codeExpiresAt: now.addingTimeInterval(-1), now: now))
            #expect(try await database.webSignIns.deleteExpired(before: now) == 2)
            #expect(try await read(2, database, now: now) != nil, "a live state stays")
            #expect(try await read(5, database, now: now.addingTimeInterval(-kept)) != nil, "an expired state stays a while")
        }
    }

    @Test func theStateIsReadWithTheStatusOfTheAccountOfASubject() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("acme", in: database)
            let now = Date()
            let identity = ProviderIdentity(
                provider: .apple, providerScope: "TEAM000001", subject: "001234.web", email: nil, emailVerified: false,
                isPrivateEmail: false,
                name: PersonName(givenName: nil, familyName: nil))
            let signedIn = try #require(
                try await database.accounts.signIn(
                    SignInRequest(
                        tenantID: tenant.id, identity: identity, sealedProviderRefreshToken: nil, intent: .auto, clientID: "com.acme.web",
                        platform: "web",
                        session: NewSession(
                            id: UUID(), refreshTokenHash: Data(RefreshToken.generate(sessionID: UUID()).hash),
                            expiresAt: now.addingTimeInterval(3_600), refreshTokenExpiresAt: now.addingTimeInterval(1_800)))))
            var scoped = state(1, tenantID: tenant.id, expiresAt: now.addingTimeInterval(600))
            scoped.providerScope = "TEAM000001"
            try await database.webSignIns.createState(scoped)
            try await database.webSignIns.createState(state(2, tenantID: tenant.id, expiresAt: now.addingTimeInterval(600)))

            let known = try #require(try await read(1, database, now: now, subject: "001234.web"))
            #expect(known.state.providerScope == "TEAM000001")
            #expect(known.account == SubjectAccountStatus(subject: "001234.web", status: .active))
            let unknown = try #require(try await read(1, database, now: now, subject: "001234.other"))
            #expect(unknown.account == SubjectAccountStatus(subject: "001234.other", status: nil), "no such identity")
            #expect(try await read(1, database, now: now, subject: nil)?.account == nil, "no subject: not looked up")
            #expect(try await read(2, database, now: now, subject: "001234.web")?.account == nil, "no scope: not looked up")

            _ = try await database.client.query("UPDATE accounts SET status = 'disabled' WHERE id = \(signedIn.account.id)")
            #expect(try await read(1, database, now: now, subject: "001234.web")?.account?.status == .disabled)
        }
    }

    @Test func statesAndCodesAreUnloggedAndReferenceNoTenantRow() async throws {
        try await TestDatabase.withFresh { database, _ in
            let rows = try await database.client.query(
                """
                SELECT c.relname, c.relpersistence::text,
                    (SELECT count(*) FROM pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'f')::int8
                FROM pg_class c WHERE c.relname IN ('web_sign_in_states', 'web_sign_in_codes') ORDER BY c.relname
                """)
            var tables: [String] = []
            for try await (name, persistence, foreignKeys) in rows.decode((String, String, Int).self) {
                #expect(persistence == "u", "\(name) is unlogged (decision 0039)")
                #expect(foreignKeys == 0, "\(name): a reference would lock the tenant's row, a logged write")
                tables.append(name)
            }
            #expect(tables == ["web_sign_in_codes", "web_sign_in_states"])
        }
    }

    /// Decision 0092: a state that names its tenant is read and written in that tenant's scope,
    /// behind the tenant wall. In another tenant's scope it is unknown (nothing claimed, no
    /// repeat, nothing kept), in its own it is claimed and taken; a state of the older form
    /// (no tenant named) is still found across tenants.
    @Test func aStateIsReadInItsTenantsScopeBehindTheWall() async throws {
        try await TestDatabase.withFreshServing { admin, serving, _ in
            let acme = try await TestDatabase.createTenant("acme", in: admin)
            let bravo = try await TestDatabase.createTenant("bravo", in: admin)
            let now = Date()
            try await TenantScope.tenant(acme.id) {
                for byte: UInt8 in 1...2 {
                    try await serving.webSignIns.createState(state(byte, tenantID: acme.id, expiresAt: now.addingTimeInterval(600)))
                }
            }
            let until = now.addingTimeInterval(10)
            let states = serving.webSignIns
            #expect(try await states.claimState(hash: hash(1), tenantID: bravo.id, now: now, claimUntil: until, subject: nil) == nil)
            #expect(try await states.repeatOf(hash: hash(1), tenantID: bravo.id, now: now, codeHash: hash(9)) == nil)
            #expect(
                try await !states.takeState(
                    hash: hash(1), tenantID: bravo.id, keepingGrant: Data([1]), codeHash: hash(9), codeExpiresAt: until, now: now))
            try await states.answerState(hash: hash(1), tenantID: bravo.id, error: "server_error")

            let claimed = try await states.claimState(hash: hash(1), tenantID: acme.id, now: now, claimUntil: until, subject: nil)
            #expect(claimed?.state.tenantID == acme.id, "unclaimed and unanswered by the other tenant's calls")
            #expect(
                try await states.takeState(
                    hash: hash(1), tenantID: acme.id, keepingGrant: Data([7]), codeHash: hash(9), codeExpiresAt: until, now: now))
            #expect(
                try await states.repeatOf(hash: hash(1), tenantID: acme.id, now: now, codeHash: hash(9))?.answer == .code(unexchanged: true)
            )
            let older = try await states.claimState(hash: hash(2), tenantID: nil, now: now, claimUntil: until, subject: nil)
            #expect(older?.state.tenantID == acme.id, "a state of the older form, across tenants")
        }
    }
}

import BrokerCore
import Foundation
import PostgresNIO
import TestSupport
import Testing

@testable import Storage

/// A relying party's authorization code kept by the statement that signs its person in, in its
/// commit (decision 0100): the quiet and first-sign-in batches answer the web sign-in's state and
/// keep the code naming the session they open, by the rule the code kept on its own follows
/// (`TakeStateStatement`): only a state that is unexpired and answered by nobody, of the
/// element's tenant, and only for a session the statement opened. A statement that keeps no codes
/// (the known and full ones) says nothing, and its caller keeps the code on its own.
@Suite struct SignInKeptCodeTests {
    let fixtures = SignInFixtures()
    static let client = "ibc_web"

    func hash(_ byte: UInt8) -> Data { Data(repeating: byte, count: 32) }

    func state(_ byte: UInt8, tenantID: UUID, expiresAt: Date) -> WebSignInState {
        WebSignInState(
            stateHash: hash(byte), tenantID: tenantID, provider: "apple", clientID: "com.acme.web",
            redirectURI: "https://id.example.com/apple/callback", returnURL: "https://app.example.com/cb", intent: .auto,
            callerState: "caller", expiresAt: expiresAt,
            relyingParty: WebSignInState.RelyingParty(
                clientID: Self.client,
                request: KeptClientRequest(issuer: "https://id.example.com/t/acme", scopes: [.openid], nonce: nil, codeChallenge: nil)))
    }

    func code(_ byte: UInt8, now: Date) -> KeptCode {
        KeptCode(
            stateHash: hash(byte), codeHash: hash(100 + byte), grantSealed: Data([byte, 9, 9]), expiresAt: now.addingTimeInterval(60),
            now: now)
    }

    /// A sign-in of `subject`, with an email of its own (two new people of one email in one
    /// batch are left to the full statement).
    func request(_ tenantID: UUID, _ subject: String, code: KeptCode?, sessionID: UUID = UUID()) -> SignInRequest {
        var request = fixtures.request(tenantID: tenantID, subject: subject, email: "\(subject)@example.com", sessionID: sessionID)
        request.keptCode = code
        return request
    }

    /// Signs each subject in once, with no code.
    func enroll(_ subjects: [String], _ tenantID: UUID, _ database: Database) async throws -> [String: SignInResult] {
        var results: [String: SignInResult] = [:]
        for subject in subjects { results[subject] = try await database.accounts.signIn(request(tenantID, subject, code: nil)) }
        return results
    }

    /// The state's answer and the code kept under `codeHash`: its session, grant and client.
    func stored(_ byte: UInt8, _ database: Database) async throws -> (codeIssued: Bool?, code: (UUID?, Data, String?)?) {
        var issued: Bool?
        for try await value in try await database.client.query(
            "SELECT code_issued FROM web_sign_in_states WHERE state_hash = \(hash(byte))"
        ).decode(Bool.self) { issued = value }
        var code: (UUID?, Data, String?)?
        for try await row in try await database.client.query(
            "SELECT session_id, grant_sealed, oauth_client_id FROM web_sign_in_codes WHERE code_hash = \(hash(100 + byte))"
        ).decode((UUID?, Data, String?).self) { code = row }
        return (issued, code)
    }

    @Test func aNewPersonsCodeIsKeptWithTheSessionAndRedeemsToItsAccount() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("kept-first", in: database)
            let now = Date()
            try await database.webSignIns.createState(state(1, tenantID: tenant.id, expiresAt: now.addingTimeInterval(600)))
            let requests = [request(tenant.id, "new-1", code: code(1, now: now)), request(tenant.id, "new-2", code: nil)]
            let outcomes = try await AccountRepository.firstSignIns(requests, client: database.client, logger: database.logger)
            guard case .created(let kept) = outcomes[0], case .created(let plain) = outcomes[1] else {
                Issue.record("\(outcomes.map(FirstSignInBatchTests.describe))")
                return
            }
            #expect(kept.codeKept == true && plain.codeKept == nil)
            let (issued, row) = try await stored(1, database)
            #expect(issued == true)
            #expect(row?.0 == requests[0].session.id && row?.1 == Data([1, 9, 9]) && row?.2 == Self.client)
            let redeemed = try await TenantScope.tenant(tenant.id) {
                try await database.webSignIns.redeem(codeHash: hash(101), tenantID: tenant.id, clientID: Self.client, now: now)
            }
            guard case .redeemed(let sealed, let provider, let sessionID, let account?) = redeemed else {
                Issue.record("\(redeemed)")
                return
            }
            #expect(sealed == Data([1, 9, 9]) && provider == "apple" && sessionID == requests[0].session.id)
            #expect(account.id == kept.account.id && account.email == "new-1@example.com" && account.emailVerified)
        }
    }

    @Test func aReturningPersonsQuietSignInKeepsTheCode() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("kept-quiet", in: database)
            let now = Date()
            let first = try await enroll(["back"], tenant.id, database)
            try await database.webSignIns.createState(state(2, tenantID: tenant.id, expiresAt: now.addingTimeInterval(600)))
            let requests = [request(tenant.id, "back", code: code(2, now: now))]
            let outcomes = try await AccountRepository.quietSignIns(requests, client: database.client, logger: database.logger)
            guard case .opened(let result) = outcomes[0] else {
                Issue.record("\(outcomes)")
                return
            }
            #expect(result.codeKept == true && result.account.id == first["back"]?.account.id)
            let (issued, row) = try await stored(2, database)
            #expect(issued == true && row?.0 == requests[0].session.id)
        }
    }

    /// Every state the rule refuses: the session still opens (its caller ends it), no code is
    /// kept, and the state is left as it was.
    enum Refused: String, CaseIterable, Sendable {
        case answeredWithAnError, answeredWithACode, expired, unknown, anotherTenants
    }

    @Test(arguments: Refused.allCases) func aStateThatCannotBeAnsweredKeepsNoCode(_ refused: Refused) async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("kept-refused", in: database)
            let other = try await TestDatabase.createTenant("kept-other", in: database)
            let now = Date()
            let owner = refused == .anotherTenants ? other.id : tenant.id
            let expiry = now.addingTimeInterval(refused == .expired ? -60 : 600)
            if refused != .unknown { try await database.webSignIns.createState(state(3, tenantID: owner, expiresAt: expiry)) }
            switch refused {
            case .answeredWithAnError: try await database.webSignIns.answerState(hash: hash(3), tenantID: owner, error: "access_denied")
            case .answeredWithACode:
                _ = try await database.client.query("UPDATE web_sign_in_states SET code_issued = true WHERE state_hash = \(hash(3))")
            default: break
            }
            let before = try await stored(3, database).codeIssued
            for quiet in [false, true] {
                let subject = "refused-\(quiet)"
                if quiet { _ = try await enroll([subject], tenant.id, database) }
                let requests = [request(tenant.id, subject, code: code(3, now: now))]
                let result: SignInResult?
                if quiet {
                    let outcomes = try await AccountRepository.quietSignIns(requests, client: database.client, logger: database.logger)
                    if case .opened(let opened) = outcomes[0] { result = opened } else { result = nil }
                } else {
                    let outcomes = try await AccountRepository.firstSignIns(requests, client: database.client, logger: database.logger)
                    if case .created(let created) = outcomes[0] { result = created } else { result = nil }
                }
                #expect(result?.codeKept == false, "\(refused) quiet: \(quiet)")
                let (issued, row) = try await stored(3, database)
                #expect(issued == before && row == nil, "\(refused) quiet: \(quiet)")
            }
        }
    }

    @Test func aReplayedSessionKeepsNoCode() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("kept-replay", in: database)
            let now = Date()
            _ = try await enroll(["again"], tenant.id, database)
            try await database.webSignIns.createState(state(4, tenantID: tenant.id, expiresAt: now.addingTimeInterval(600)))
            let taken = UUID()
            _ = try await AccountRepository.quietSignIns(
                [request(tenant.id, "again", code: nil, sessionID: taken)], client: database.client,
                logger: database.logger)
            var replay = request(tenant.id, "again", code: code(4, now: now))
            replay.session.id = taken
            let outcomes = try await AccountRepository.quietSignIns([replay], client: database.client, logger: database.logger)
            guard case .replayed = outcomes[0] else {
                Issue.record("\(outcomes)")
                return
            }
            let (issued, row) = try await stored(4, database)
            #expect(issued == false && row == nil)
        }
    }

    /// A stored identity bringing something new (a new email; an Apple web sign-in's provider
    /// refresh token) takes the known statement, which keeps the code too; a sign-in only the
    /// full statement handles (a new identity joining an account by its email) says nothing, and
    /// the state is left for the caller's own take.
    @Test func theKnownStatementKeepsTheCodeAndTheFullOneSaysNothing() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("kept-known", in: database)
            let now = Date()
            _ = try await enroll(["moved"], tenant.id, database)
            try await database.webSignIns.createState(state(5, tenantID: tenant.id, expiresAt: now.addingTimeInterval(600)))
            var moved = request(tenant.id, "moved", code: code(5, now: now))
            moved.identity.email = "elsewhere@example.com"
            let result = try #require(try await database.accounts.signIn(moved))
            #expect(result.codeKept == true && result.account.email == "elsewhere@example.com")
            let (issued, row) = try await stored(5, database)
            #expect(issued == true && row?.0 == moved.session.id)

            try await database.webSignIns.createState(state(6, tenantID: tenant.id, expiresAt: now.addingTimeInterval(600)))
            var linker = request(tenant.id, "linker", code: code(6, now: now))
            linker.identity.email = "elsewhere@example.com"
            linker.autoLinkByEmail = true
            let linked = try #require(try await database.accounts.signIn(linker))
            #expect(linked.linkedBy == .verifiedEmail && linked.account.id == result.account.id)
            #expect(linked.codeKept == nil)
            let (untouched, none) = try await stored(6, database)
            #expect(untouched == false && none == nil)
        }
    }

    /// A batch keeps the codes of its first ``SignInRules/codesKeptPerStatement`` elements that
    /// carry one; the others' sign-ins say nothing of theirs, which their callers keep on their own.
    @Test func aBatchKeepsTheCodesOfItsFirstFewAndLeavesTheRest() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("kept-many", in: database)
            let now = Date()
            let count = SignInRules.codesKeptPerStatement + 2
            var requests: [SignInRequest] = []
            for index in 0..<count {
                let byte = UInt8(30 + index)
                try await database.webSignIns.createState(state(byte, tenantID: tenant.id, expiresAt: now.addingTimeInterval(600)))
                requests.append(request(tenant.id, "many-\(index)", code: code(byte, now: now)))
            }
            requests.insert(request(tenant.id, "no-code", code: nil), at: 1)
            let outcomes = try await AccountRepository.firstSignIns(requests, client: database.client, logger: database.logger)
            var kept: [Bool?] = []
            for outcome in outcomes {
                guard case .created(let result) = outcome else {
                    Issue.record("\(FirstSignInBatchTests.describe(outcome))")
                    return
                }
                kept.append(result.codeKept)
            }
            let expected: [Bool?] =
                [true, nil] + Array(repeating: true, count: SignInRules.codesKeptPerStatement - 1) + [nil, nil]
            #expect(kept == expected)
            for index in 0..<count {
                let (issued, row) = try await stored(UInt8(30 + index), database)
                let keeps = index < SignInRules.codesKeptPerStatement
                #expect(issued == keeps && (row != nil) == keeps, "element \(index)")
            }
        }
    }

    /// Both forms of each lean statement sign the same people in the same way: a batch of new,
    /// returning and replayed elements, once as it is and once with a code on each (of a state
    /// that does not exist, so none is kept), in two tenants of one database.
    @Test func theFormKeepingCodesSignsInAsThePlainOne() async throws {
        try await TestDatabase.withFresh { database, _ in
            let now = Date()
            var answers: [[String]] = []
            for (index, withCodes) in [false, true].enumerated() {
                let tenant = try await TestDatabase.createTenant("kept-forms-\(index)", in: database)
                let code: KeptCode? = withCodes ? code(20, now: now) : nil
                _ = try await enroll(["r1", "r2"], tenant.id, database)
                let taken = UUID()
                _ = try await AccountRepository.quietSignIns(
                    [request(tenant.id, "r2", code: nil, sessionID: taken)], client: database.client,
                    logger: database.logger)
                var replay = request(tenant.id, "r2", code: code)
                replay.session.id = taken
                let quiet = try await AccountRepository.quietSignIns(
                    [request(tenant.id, "r1", code: code), replay, request(tenant.id, "n1", code: code)], client: database.client,
                    logger: database.logger)
                let first = try await AccountRepository.firstSignIns(
                    [request(tenant.id, "n1", code: code), request(tenant.id, "r1", code: code), request(tenant.id, "n2", code: code)],
                    client: database.client, logger: database.logger)
                var answer = quiet.map { outcome -> String in
                    switch outcome {
                    case .opened(let result): "opened \(result.codeKept.map(String.init) ?? "-")"
                    case .notQuiet: "not quiet"
                    case .replayed: "replayed"
                    }
                }
                answer += first.map { outcome -> String in
                    switch outcome {
                    case .created(let result), .opened(let result):
                        "\(FirstSignInBatchTests.describe(outcome)) \(result.codeKept.map(String.init) ?? "-") \(result.isNewAccount)"
                    default: FirstSignInBatchTests.describe(outcome)
                    }
                }
                var sessions = 0
                for try await count in try await database.client.query(
                    "SELECT count(*)::int4 FROM sessions WHERE tenant_id = \(tenant.id)"
                ).decode(Int32.self) { sessions = Int(count) }
                answer.append("sessions \(sessions)")
                answers.append(answer)
            }
            #expect(
                answers[0] == ["opened -", "replayed", "not quiet", "created - true", "opened - false", "created - true", "sessions 7"])
            #expect(
                answers[1] == [
                    "opened false", "replayed", "not quiet", "created false true", "opened false false", "created false true",
                    "sessions 7",
                ])
        }
    }
}

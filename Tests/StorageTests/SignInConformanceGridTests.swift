import BrokerCore
import Foundation
import PostgresNIO
import TestSupport
import Testing

@testable import Storage

/// The sign-in conformance grid (issue 40), in the manner of a storage conformance suite:
/// every combination of stored state × token shape × batch composition runs through every path
/// the dispatcher can choose (the lean quiet, first-sign-in and known-identity batches, each
/// handing the full statement what it does not apply to; the repository as a process that has
/// and has not seen the person), each on a tenant of its own, and the rows written (accounts,
/// identities, sessions, events, audit rows, replay keys) and the answers equal those of the
/// full statement run element by element, row for row. A rule or a column one path forgets
/// fails here.
@Suite struct SignInConformanceGridTests {
    /// What the tenant holds before the sign-ins.
    enum Stored: String, CaseIterable, Sendable {
        case nothing
        case identity
        case disabledAccount
        case deletedAccount
        /// Imported: no `real_user_status`, no names, never signed in.
        case imported
        /// Another account has the token's verified email, and the tenant links by email.
        case emailOfAnotherAccount
        /// Another account has the token's verified email, and the tenant does not link.
        case emailOfAnotherAccountNoLink
        /// The identity holds a private relay address.
        case relayEmail
        /// The account has as many open sessions as the tenant's cap.
        case capReached
        /// The identity holds a sealed provider refresh token.
        case providerRefreshToken
        /// Apple revoked consent: the identity is gone, its account disabled, the revocation
        /// remembered.
        case consentRevoked
    }

    /// What the token brings.
    enum Token: String, CaseIterable, Sendable {
        case firstAuthorizationWithName
        case later
        case newEmail
        case privateEmail
        case withRefreshToken
    }

    /// What arrives in the same batch.
    enum Batch: String, CaseIterable, Sendable {
        case alone
        case withAnotherPerson
        case withSecondIdentityOfTheAccount
        case withReplay
    }

    /// How the sign-ins are written.
    enum Path: String, CaseIterable, Sendable {
        /// The reference: the full statement, element by element, in batch order.
        case full
        case quietBatch
        case firstBatch
        case knownBatch
        case freshProcess
        case processThatSawThem
    }

    let quiet = SignInFixtures()

    // MARK: The tenant before

    func run(_ sql: String, _ database: Database) async throws {
        for statement in sql.split(separator: ";") where !statement.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty {
            try await database.client.query(PostgresQuery(unsafeSQL: String(statement)))
        }
    }

    func token(_ tenantID: UUID, subject: String, _ token: Token, email: String = "p@example.com") -> SignInRequest {
        var request = quiet.request(tenantID: tenantID, subject: subject, email: email)
        switch token {
        case .firstAuthorizationWithName:
            request.identity.name = PersonName(givenName: "Ada", familyName: "Lovelace")
            request.identity.realUserStatus = 2
            request.identity.attributes = ["locale": "en"]
        case .later: break
        case .newEmail: request.identity.email = "p.new@example.com"
        case .privateEmail:
            request.identity.email = "relay@privaterelay.appleid.com"
            request.identity.isPrivateEmail = true
        case .withRefreshToken: request.sealedProviderRefreshToken = Data([9, 8, 7])
        }
        return request
    }

    /// Leaves the tenant as `stored` says; `q` is always a returning person of its own.
    func prepare(_ tenantID: UUID, _ stored: Stored, _ database: Database) async throws {
        let tenant = "tenant_id = '\(tenantID.uuidString)'"
        let p = "\(tenant) AND subject = 'p'"
        let account = "\(tenant) AND id = (SELECT account_id FROM identities WHERE \(p))"
        _ = try await database.accounts.signIn(token(tenantID, subject: "q", .later, email: "q@example.com"))
        if stored != .nothing, stored != .emailOfAnotherAccount, stored != .emailOfAnotherAccountNoLink {
            _ = try await database.accounts.signIn(token(tenantID, subject: "p", .firstAuthorizationWithName))
            // A second identity of the account.
            try await run(
                """
                INSERT INTO identities (id, tenant_id, account_id, provider, provider_scope, subject, email, email_verified,
                    is_private_email)
                SELECT gen_random_uuid(), tenant_id, account_id, provider, provider_scope, 'p2', email, email_verified,
                    is_private_email
                FROM identities WHERE \(p)
                """, database)
        }
        switch stored {
        case .nothing, .identity: break
        case .disabledAccount:
            try await run("UPDATE accounts SET status = 'disabled', disabled_reason = 'operator' WHERE \(account)", database)
        case .deletedAccount: try await run("UPDATE accounts SET status = 'deleted' WHERE \(account)", database)
        case .imported:
            try await run(
                "UPDATE identities SET real_user_status = NULL, given_name = NULL, family_name = NULL, last_sign_in_at = NULL WHERE \(p)",
                database)
        case .emailOfAnotherAccount, .emailOfAnotherAccountNoLink:
            _ = try await database.accounts.signIn(token(tenantID, subject: "other", .later))
        case .relayEmail:
            try await run(
                """
                UPDATE identities SET email = 'relay@privaterelay.appleid.com', is_private_email = true WHERE \(p);
                UPDATE accounts SET email = 'relay@privaterelay.appleid.com', is_private_email = true WHERE \(account)
                """, database)
        case .capReached:
            _ = try await database.accounts.signIn(token(tenantID, subject: "p", .later))
        case .providerRefreshToken:
            try await run(
                "UPDATE identities SET provider_refresh_token_sealed = '\\x010203', provider_token_client_id = 'com.acme.app' WHERE \(p)",
                database)
        case .consentRevoked:
            try await run(
                """
                INSERT INTO consent_revocations (tenant_id, provider, provider_scope, subject, account_id)
                SELECT tenant_id, provider, provider_scope, subject, account_id FROM identities WHERE \(p);
                UPDATE sessions SET revoked_at = now(), revoke_reason = 'consent_revoked'
                WHERE \(tenant) AND account_id = (SELECT account_id FROM identities WHERE \(p));
                UPDATE accounts SET status = 'disabled', disabled_reason = 'consent_revoked' WHERE \(account);
                DELETE FROM identities WHERE \(tenant) AND subject IN ('p', 'p2')
                """, database)
        }
    }

    /// The sign-ins of a cell on another tenant, with fresh session ids where `requests` has
    /// fresh ones and the same repeats (a replay stays a replay).
    func requests(_ tenantID: UUID, _ stored: Stored, _ token: Token, _ batch: Batch, like requests: [SignInRequest]) -> [SignInRequest] {
        var twins = self.requests(tenantID, stored, token, batch)
        for n in twins.indices {
            if let first = requests.firstIndex(where: { $0.session.id == requests[n].session.id }), first < n {
                twins[n].session.id = twins[first].session.id
            }
        }
        return twins
    }

    /// The sign-ins of one cell, in batch order.
    func requests(_ tenantID: UUID, _ stored: Stored, _ token: Token, _ batch: Batch) -> [SignInRequest] {
        var p = self.token(tenantID, subject: "p", token)
        p.autoLinkByEmail = stored == .emailOfAnotherAccount
        p.maxOpenSessions = stored == .capReached ? 2 : 100
        switch batch {
        case .alone: return [p]
        case .withAnotherPerson: return [p, self.token(tenantID, subject: "q", .later, email: "q@example.com")]
        case .withSecondIdentityOfTheAccount:
            var second = self.token(tenantID, subject: "p2", .firstAuthorizationWithName)
            second.maxOpenSessions = p.maxOpenSessions
            return [p, second]
        case .withReplay:
            var replay = p
            replay.session.id = p.session.id
            return [p, replay]
        }
    }

    // MARK: The paths

    /// What one sign-in came to.
    enum Answer: Equatable, CustomStringConvertible {
        case none
        case replayed
        case signedIn(new: Bool, linkedBy: String?, possibleDuplicate: Bool, subject: String)

        init(_ result: SignInResult?) {
            guard let result else {
                self = .none
                return
            }
            self = .signedIn(
                new: result.isNewAccount, linkedBy: result.linkedBy?.rawValue, possibleDuplicate: result.possibleDuplicate,
                subject: result.identity.subject)
        }

        var description: String {
            switch self {
            case .none: "none"
            case .replayed: "replayed"
            case .signedIn(let new, let linkedBy, let duplicate, let subject):
                "\(subject) new=\(new) linked=\(linkedBy ?? "-") duplicate=\(duplicate)"
            }
        }
    }

    func full(_ request: SignInRequest, _ database: Database) async throws -> Answer {
        do {
            let rows = try await database.client.rows(
                AccountRepository.SignInStatement(request: request, newIdentityID: .timeOrdered(), newAccountID: .timeOrdered()),
                logger: database.logger)
            var first: PostgresRow?
            for row in rows where first == nil { first = row }
            guard let row = first else { return .none }
            var reader = RowReader(row)
            _ = try AccountRepository.decodeAccount(&reader)
            let identity = try AccountRepository.decodeIdentity(&reader)
            let (inserted, linked, duplicate, renewed): (Bool, Bool, Bool, Bool) =
                (try reader.next(), try reader.next(), try reader.next(), try reader.next())
            return .signedIn(
                new: inserted && !linked, linkedBy: linked && !renewed ? LinkedBy.verifiedEmail.rawValue : nil,
                possibleDuplicate: duplicate && !renewed, subject: identity.subject)
        } catch let error where error.postgresError?.violatedConstraint == "sessions_pkey" {
            return .replayed
        }
    }

    func known(_ requests: [SignInRequest], _ database: Database) async throws -> [Answer?] {
        let results = try await AccountRepository.knownSignIns(requests, client: database.client, logger: database.logger)
        return results.map { $0.map(Answer.init) }
    }

    /// The sign-ins through `path`: each lean batch with the composition, then the full
    /// statement, in batch order, for each element it did not apply to.
    func signIn(_ requests: [SignInRequest], through path: Path, _ database: Database) async throws -> [Answer] {
        try await signInCounting(requests, through: path, database).answers
    }

    /// The answers, and the elements the path's lean statement answered (the rest are the
    /// full statement's, which runs after the lean statement committed).
    func signInCounting(_ requests: [SignInRequest], through path: Path, _ database: Database) async throws
        -> (answers: [Answer], lean: [Int])
    {
        var answers = [Answer?](repeating: nil, count: requests.count)
        switch path {
        case .full: break
        case .quietBatch:
            for (n, outcome) in try await AccountRepository.quietSignIns(requests, client: database.client, logger: database.logger)
                .enumerated()
            where requests[n].sealedProviderRefreshToken == nil {
                switch outcome {
                case .opened(let result): answers[n] = Answer(result)
                case .replayed: answers[n] = .replayed
                case .notQuiet: break
                }
            }
        case .firstBatch:
            let eligible = requests.indices.filter { requests[$0].intent != .signIn }
            let outcomes = try await AccountRepository.firstSignIns(
                eligible.map { requests[$0] }, client: database.client, logger: database.logger)
            var knownOnes: [Int] = []
            for (n, outcome) in zip(eligible, outcomes) {
                switch outcome {
                case .created(let result), .opened(let result): answers[n] = Answer(result)
                case .replayed: answers[n] = .replayed
                case .known: knownOnes.append(n)
                case .elsewhere: break
                }
            }
            if !knownOnes.isEmpty {
                for (n, answer) in zip(knownOnes, try await known(knownOnes.map { requests[$0] }, database)) { answers[n] = answer }
            }
        case .knownBatch:
            // Every element, a posted provider refresh token included (decision 0091). A taken
            // session id fails the statement (the batcher then runs its elements one by one).
            for (n, answer) in zip(requests.indices, try await known(requests, database)) { answers[n] = answer }
        case .freshProcess, .processThatSawThem:
            let recent = RecentSignIns()
            if path == .processThatSawThem {
                for request in requests {
                    recent.record(
                        .init(
                            tenantID: request.tenantID, provider: request.provider, providerScope: request.providerScope,
                            subject: request.subject))
                }
            }
            let repository = AccountRepository(client: database.client, logger: database.logger, recentSignIns: recent)
            let answers = try await requests.asyncMap { request in
                do { return Answer(try await repository.signIn(request)) } catch is IdentityTokenReplayed { return Answer.replayed }
            }
            return (answers, [])
        }
        var result: [Answer] = []
        for (request, answer) in zip(requests, answers) {
            if let answer { result.append(answer) } else { result.append(try await full(request, database)) }
        }
        return (result, answers.indices.filter { answers[$0] != nil })
    }

    // MARK: The rows after

    /// A tenant's rows without ids and stamps: each account with its identities, sessions,
    /// events and audit rows, the consent revocations, and which sign-ins' replay keys
    /// (session ids) are taken.
    func rows(_ tenantID: UUID, sessions: [UUID], _ database: Database) async throws -> [String] {
        let tenant = "'\(tenantID.uuidString)'"
        let identityColumns = [
            "i.subject", "i.email", "i.email_verified", "i.is_private_email", "i.given_name", "i.family_name", "i.real_user_status",
            "i.attributes", "encode(i.provider_refresh_token_sealed, 'hex')", "i.provider_token_client_id", "i.last_sign_in_at IS NULL",
            "(SELECT count(*) FROM sessions s WHERE s.identity_id = i.id AND s.revoked_at IS NULL)",
        ]
        let accountColumns = [
            "a.status", "a.disabled_reason", "a.email", "a.email_verified", "a.is_private_email", "a.given_name", "a.family_name",
            "a.display_name",
            "(SELECT string_agg(i.subject, ',' ORDER BY i.subject) FROM identities i WHERE i.account_id = a.id)",
            "(SELECT count(*) FROM sessions s WHERE s.account_id = a.id AND s.revoked_at IS NULL)",
            "(SELECT string_agg(s.revoke_reason, ',' ORDER BY s.revoke_reason) FROM sessions s WHERE s.account_id = a.id)",
            "(SELECT string_agg(s.client_id || '/' || coalesce(s.platform, '-') || '/' || s.idp, ',' ORDER BY s.client_id) FROM sessions s WHERE s.account_id = a.id)",
            """
            (SELECT string_agg(e.event_type || (e.payload - 'account_id' - 'identity_id')::text, ',' ORDER BY e.event_type, e.payload::text)
             FROM events_outbox e WHERE e.account_id = a.id)
            """,
            """
            (SELECT string_agg(l.action || (l.details - 'account_id' - 'identity_id')::text, ',' ORDER BY l.action)
             FROM audit_log l JOIN identities i ON l.target = i.id::text WHERE l.tenant_id = a.tenant_id AND i.account_id = a.id)
            """,
        ]
        func text(_ columns: [String]) -> String { columns.map { "coalesce((\($0))::text, '-')" }.joined(separator: ", ") }
        let sessionList = sessions.map { "'\($0.uuidString)'::uuid" }.joined(separator: ", ")
        let query = """
            SELECT * FROM (
                SELECT 'account ' || concat_ws(' | ', \(text(accountColumns))) AS line FROM accounts a WHERE a.tenant_id = \(tenant)
                UNION ALL
                SELECT 'identity ' || concat_ws(' | ', \(text(identityColumns))) FROM identities i WHERE i.tenant_id = \(tenant)
                UNION ALL
                SELECT 'revocation ' || c.subject FROM consent_revocations c WHERE c.tenant_id = \(tenant)
                UNION ALL
                SELECT 'replay keys taken ' || count(*) FROM sessions s WHERE s.tenant_id = \(tenant) AND s.id IN (\(sessionList))
                UNION ALL
                SELECT 'sessions ' || count(*) FROM sessions s WHERE s.tenant_id = \(tenant)
            ) x ORDER BY line
            """
        var lines: [String] = []
        for try await line in try await database.client.query(PostgresQuery(unsafeSQL: query)).decode(String.self) {
            lines.append(line)
        }
        return lines
    }

    // MARK: The grid

    struct Cell: Sendable, CustomStringConvertible {
        let stored: Stored
        let token: Token
        let batch: Batch
        var description: String { "\(stored.rawValue) × \(token.rawValue) × \(batch.rawValue)" }
    }

    static let cells: [Cell] = Stored.allCases.flatMap { stored in
        Token.allCases.flatMap { token in Batch.allCases.map { Cell(stored: stored, token: token, batch: $0) } }
    }

    /// Every cell of one stored state (one database each, a tenant per path).
    @Test(arguments: Stored.allCases)
    func everyPathWritesWhatTheFullStatementWrites(_ stored: Stored) async throws {
        try await TestDatabase.withFresh { database, _ in
            var checked = 0
            var lean: [Path: Int] = [:]
            for cell in Self.cells where cell.stored == stored {
                for path in Path.allCases where path != .full {
                    let tenant = try await TestDatabase.createTenant("grid-\(checked)-\(path.rawValue.lowercased())", in: database)
                    try await prepare(tenant.id, cell.stored, database)
                    let requests = requests(tenant.id, cell.stored, cell.token, cell.batch)
                    let (answers, leanAnswered) = try await signInCounting(requests, through: path, database)
                    lean[path, default: 0] += leanAnswered.count
                    let rows = try await rows(tenant.id, sessions: requests.map(\.session.id), database)

                    // The reference: the full statement on a tenant prepared alike, element by
                    // element in the order the path committed them (what its lean statement
                    // answered first, in batch order, then the rest). Sign-ins that arrive
                    // together have no order among themselves; a path may serialize them so.
                    let other = try await TestDatabase.createTenant("full-\(checked)-\(path.rawValue.lowercased())", in: database)
                    try await prepare(other.id, cell.stored, database)
                    let twins = self.requests(other.id, cell.stored, cell.token, cell.batch, like: requests)
                    let order = leanAnswered + twins.indices.filter { !leanAnswered.contains($0) }
                    var expected = [Answer](repeating: .none, count: twins.count)
                    for n in order { expected[n] = try await full(twins[n], database) }
                    let expectedRows = try await self.rows(other.id, sessions: twins.map(\.session.id), database)

                    #expect(answers == expected, "\(cell) through \(path): answers")
                    #expect(rows == expectedRows, "\(cell) through \(path): rows \(difference(rows, expectedRows))")
                }
                checked += 1
            }
            #expect(checked == Token.allCases.count * Batch.allCases.count)
            print("grid \(stored.rawValue): lean answers by path \(lean.sorted { $0.key.rawValue < $1.key.rawValue })")
        }
    }

    func difference(_ rows: [String], _ reference: [String]) -> String {
        let extra = rows.filter { !reference.contains($0) }, missing = reference.filter { !rows.contains($0) }
        return "written \(extra), not written \(missing)"
    }

    /// The grid reaches what it is for: each path applies to some cells (a lean statement that
    /// never applied would compare the full statement with itself), and the answers cover new
    /// accounts, links, possible duplicates, refusals and replays.
    @Test func theGridReachesEveryOutcome() async throws {
        try await TestDatabase.withFresh { database, _ in
            var outcomes: Set<String> = []
            var lean: [Path: Int] = [:]
            // Sign-ins that keep a provider refresh token (an Apple code sign-in) the known batch
            // answered (decision 0091).
            var knownWithRefreshToken = 0
            for (index, cell) in Self.cells.enumerated() where cell.batch != .withAnotherPerson {
                for path in [Path.quietBatch, .firstBatch, .knownBatch] {
                    let tenant = try await TestDatabase.createTenant("lean-\(index)-\(path.rawValue.lowercased())", in: database)
                    try await prepare(tenant.id, cell.stored, database)
                    let answered = try await signInCounting(
                        requests(tenant.id, cell.stored, cell.token, cell.batch), through: path, database
                    ).lean.count
                    lean[path, default: 0] += answered
                    if path == .knownBatch, cell.token == .withRefreshToken { knownWithRefreshToken += answered }
                }
                let tenant = try await TestDatabase.createTenant("reach-\(index)", in: database)
                try await prepare(tenant.id, cell.stored, database)
                for answer in try await signIn(requests(tenant.id, cell.stored, cell.token, cell.batch), through: .full, database) {
                    switch answer {
                    case .none: outcomes.insert("none")
                    case .replayed: outcomes.insert("replayed")
                    case .signedIn(let new, let linkedBy, let duplicate, _):
                        if new { outcomes.insert("new") }
                        if linkedBy != nil { outcomes.insert("linked") }
                        if duplicate { outcomes.insert("duplicate") }
                        if !new && linkedBy == nil { outcomes.insert("returning") }
                    }
                }
            }
            #expect(outcomes == ["none", "replayed", "new", "linked", "duplicate", "returning"])
            #expect(lean[.quietBatch, default: 0] > 0 && lean[.firstBatch, default: 0] > 0 && lean[.knownBatch, default: 0] > 0, "\(lean)")
            #expect(knownWithRefreshToken > 0)
            print("grid: lean answers by path \(lean.sorted { $0.key.rawValue < $1.key.rawValue })")
        }
    }
}

extension Array where Element: Sendable {
    fileprivate func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}

import BrokerCore
import Foundation
import Logging
import NIOCore
import PostgresNIO

/// Writes import batches (issue 24; decisions 0047, 0060): each in one transaction, read,
/// decided, written with one `INSERT` per table, and tried again when a concurrent write took
/// one of its keys. A job's
/// batches carry the job's id on their rows; the API's (`POST /v1/accounts/import`) carry none.
struct ImportBatchWriter: Sendable {
    let tenantID: UUID
    let jobID: UUID?
    let dryRun: Bool
    /// How long each statement of a batch may take (``statement(_:on:)``): a batch caught by an
    /// outage fails (``DatabaseDeadlineExceeded``, the database is unavailable) instead of
    /// hanging the import; the job then resumes after its last commit.
    let statementTimeout: Duration
    let logger: Logger
    /// What each batch's transaction sets beside its tenant scope
    /// (``DatabaseConfiguration/transactionSettings``).
    var transactionSettings: [(String, String)] = []
    /// A dry run's memory of what its earlier batches would have written (nil otherwise).
    var dryRunMemory: ImportDryRunMemory? = nil

    /// Runs one batch in a transaction on `connection`; `finish` runs in it last, with the
    /// outcomes and the number of identities written. `beforeInserts` runs once the batch has
    /// read what exists and encoded its rows, right before its inserts; `afterInserts` once
    /// they succeeded (a job's batches on two connections take turns there, see
    /// ``ImportSession``). A unique violation can only come from the inserts, so a batch past
    /// `afterInserts` is never tried again.
    ///
    /// A unique violation means a sign-in or another import committed one of the batch's keys
    /// between the batch's lookup and its insert: the batch is rolled back and tried again,
    /// and the next try's lookup sees that key, so its record comes out a conflict (or updated,
    /// or unchanged), as if the write had come first. It is tried again as long as each try
    /// finds a key the one before did not (issue 39 F17: three tries were not enough while the
    /// same people signed in at 300 a second); a violation the lookup cannot explain is thrown
    /// after one more try, and no batch is tried more often than it has keys.
    func write<Extra>(
        _ rows: [ImportRow], on connection: PostgresConnection, beforeInserts: () async throws -> Void = {},
        afterInserts: () -> Void = {}, finish: ([ImportOutcome], Int, PostgresConnection) async throws -> Extra
    ) async throws -> (outcomes: [ImportOutcome], counts: Extra) {
        var attempt = 1
        let maxAttempts = 2 + rows.reduce(0) { $0 + 1 + $1.identities.count }
        // What the last try found, and the violation that ended it.
        var previous: (found: ImportClassifier.Found, violation: any Error)?
        while true {
            do {
                try await statement("BEGIN", on: connection)
                do {
                    // The batch's scope for its own transaction too: through a pooler in
                    // transaction mode, the session's may be another connection's.
                    let logger = logger
                    let settings = transactionSettings
                    try await withDatabaseDeadline(statementTimeout) {
                        try await connection.setTransactionTenantScope(settings: settings, logger: logger)
                    }
                    let plan = try await writeBatch(rows, on: connection, beforeInserts: beforeInserts) { found in
                        // The key that was in the way is committed now: a try that finds no key
                        // the last one missed would meet the same violation again.
                        if let previous, found.isSubset(of: previous.found) { throw previous.violation }
                        previous = nil
                        return found
                    }
                    afterInserts()
                    let extra = try await finish(plan.outcomes, plan.identities.count, connection)
                    try await statement("COMMIT", on: connection)
                    return (plan.outcomes, extra)
                } catch {
                    _ = try? await statement("ROLLBACK", on: connection)
                    throw error
                }
            } catch let error as TriedAgain where attempt < maxAttempts {
                logger.debug("import batch met a concurrent write; reading again", metadata: ["attempt": "\(attempt)"])
                previous = (error.found, error.violation)
                attempt += 1
            } catch let error as TriedAgain {
                throw error.violation
            }
        }
    }

    /// A unique violation of a try that found `found`.
    private struct TriedAgain: Error {
        let found: ImportClassifier.Found
        let violation: any Error
    }

    private func writeBatch(
        _ rows: [ImportRow], on connection: PostgresConnection, beforeInserts: () async throws -> Void,
        checkFound: (ImportClassifier.Found) throws -> ImportClassifier.Found
    ) async throws -> ImportClassifier.Plan {
        // A dry run writes nothing a later batch could find: it decides after the batch before
        // it has decided, with what that one and the ones before would have written.
        if dryRunMemory != nil { try await beforeInserts() }
        var classifier = try await existing(rows, on: connection)
        let found = try checkFound(classifier.found)
        dryRunMemory?.recall(rows, into: &classifier)
        let plan = classifier.plan(rows) { UUID.timeOrdered() }
        dryRunMemory?.remember(plan)
        let accounts = dryRun || plan.accounts.isEmpty ? nil : accountRows(plan.accounts)
        let identities = dryRun || plan.identities.isEmpty ? nil : identityRows(plan.identities)
        if dryRunMemory == nil { try await beforeInserts() }
        do {
            if let accounts { try await insert(accounts, into: "accounts", on: connection) }
            if let identities { try await insert(identities, into: "identities", on: connection) }
        } catch let error where error.postgresError?.isUniqueViolation == true {
            throw TriedAgain(found: found, violation: error)
        }
        return plan
    }

    /// What the database holds for the batch's keys: the accounts of its external ids, and the
    /// accounts its identities belong to. Each key is looked up on its own (`LATERAL … LIMIT 1`
    /// through its unique index): as a join, the planner hashed every account of the tenant for
    /// each batch once the tenant held a few hundred thousand, and the same file again took
    /// 25.9 s for 200,000 records. Both lookups are one statement, so they see one snapshot: as
    /// two, a batch committing in between (the job's batch before, or a sign-in) showed its
    /// identity without its account, and a record that should have been `updated` came out a
    /// conflict (decision 0061).
    private func existing(_ rows: [ImportRow], on connection: PostgresConnection) async throws -> ImportClassifier {
        let identities = rows.flatMap(\.identities)
        var classifier = ImportClassifier(accounts: [:], owners: [:])
        guard !rows.isEmpty else { return classifier }
        let result = try await statement(
            """
            SELECT k.e, NULL::text, NULL::text, a.id, a.status FROM unnest(\(rows.map(\.externalID))::text[]) AS k(e)
            CROSS JOIN LATERAL (
                SELECT a.id, a.status FROM accounts a WHERE a.tenant_id = \(tenantID) AND a.external_id = k.e LIMIT 1) a
            UNION ALL
            SELECT k.p, k.s, k.u, i.account_id, NULL::text
            FROM unnest(\(identities.map(\.provider))::text[], \(identities.map(\.providerScope))::text[],
                \(identities.map(\.subject))::text[]) AS k(p, s, u)
            CROSS JOIN LATERAL (
                SELECT i.account_id FROM identities i
                WHERE i.tenant_id = \(tenantID) AND i.provider = k.p AND i.provider_scope = k.s AND i.subject = k.u LIMIT 1) i
            """, on: connection)
        for row in result {
            let (key, scope, subject, id, status) = try row.decode((String, String?, String?, UUID, String?).self)
            if let scope, let subject {
                classifier.owners[ImportIdentityKey(provider: key, providerScope: scope, subject: subject)] = id
            } else {
                classifier.accounts[ExactText(key)] = .init(id: id, status: status.flatMap(AccountStatus.init(rawValue:)) ?? .disabled)
            }
        }
        return classifier
    }

    static let accountColumns = [
        "id", "tenant_id", "external_id", "given_name", "family_name", "display_name", "email", "email_verified", "is_private_email",
        "status", "created_at", "import_job_id",
    ]

    private func accountRows(_ accounts: [(id: UUID, row: ImportRow)]) -> InsertedRows {
        var rows = InsertedRows(columns: Self.accountColumns, capacity: accounts.count * 400)
        let now = Date()
        for (id, row) in accounts {
            rows.uuid(id)
            rows.uuid(tenantID)
            rows.text(row.externalID)
            rows.text(row.name.givenName)
            rows.text(row.name.familyName)
            let display = [row.name.givenName, row.name.familyName].compactMap { $0?.isEmpty == false ? $0 : nil }.joined(separator: " ")
            rows.text(display.isEmpty ? nil : display)
            rows.text(row.email)
            rows.bool(row.emailVerified)
            rows.bool(row.isPrivateEmail)
            rows.text(row.status.rawValue)
            rows.timestamp(row.createdAt ?? now)
            rows.uuid(jobID)
            rows.endRow()
        }
        return rows
    }

    static let identityColumns = [
        "id", "tenant_id", "account_id", "provider", "provider_scope", "subject", "email", "email_verified", "is_private_email",
        "provider_refresh_token_sealed", "provider_token_client_id", "created_at", "import_job_id",
    ]

    private func identityRows(_ identities: [(accountID: UUID, identity: ImportRowIdentity, createdAt: Date?)]) -> InsertedRows {
        var rows = InsertedRows(columns: Self.identityColumns, capacity: identities.count * 400)
        let now = Date()
        for (accountID, identity, createdAt) in identities {
            rows.uuid(UUID.timeOrdered())
            rows.uuid(tenantID)
            rows.uuid(accountID)
            rows.text(identity.provider)
            rows.text(identity.providerScope)
            rows.text(identity.subject)
            rows.text(identity.email)
            rows.bool(identity.emailVerified)
            rows.bool(identity.isPrivateEmail)
            rows.bytes(identity.sealedRefreshToken)
            rows.text(identity.sealedRefreshToken == nil ? nil : identity.refreshTokenClientID)
            rows.timestamp(createdAt ?? now)
            rows.uuid(jobID)
            rows.endRow()
        }
        return rows
    }

    /// One statement of a batch, its rows read, within ``statementTimeout``: PostgresNIO may never
    /// answer a statement written to a connection that an outage closed (decision 0056), and
    /// a batch must fail then, not wait; the job resumes after its last commit. Seen with
    /// PostgresNIO 1.33.2; the deadline is kept even once `Benchmarks/upstream`'s
    /// `repro-closed-connection` exits 1 (docs/upstream.md, "A statement on a closed connection"):
    /// a connection cut off without a word is not answered either.
    @discardableResult
    func statement(_ query: PostgresQuery, on connection: PostgresConnection) async throws -> [PostgresRow] {
        let logger = logger
        return try await withDatabaseDeadline(statementTimeout) { try await connection.query(query, logger: logger).collect() }
    }

    /// One `INSERT` of `rows` (``statement(_:on:)``): the rows travel as one JSON parameter and
    /// `json_populate_recordset` reads them with each column's own type. Not `COPY FROM STDIN`:
    /// PostgresNIO's `copyFrom` stops the process (a `preconditionFailure`) when the server
    /// goes away between its `CopyInResponse` and the data, which a database restart during an
    /// import met (`WorkerOutageTests`). An insert also passes the tenant wall (decision 0055)
    /// as it is, where `COPY FROM` into a table under row-level security is refused. Seen with
    /// PostgresNIO 1.33.2 (decision 0060; docs/upstream.md, "COPY stops the process"); the
    /// crash is gone when `Benchmarks/upstream`'s `repro-copy-precondition` exits 1, but the
    /// tenant wall still keeps this an INSERT.
    private func insert(_ rows: InsertedRows, into table: String, on connection: PostgresConnection) async throws {
        let list = rows.columns.joined(separator: ", ")
        var bound = PostgresQuery(
            unsafeSQL: "INSERT INTO \(table) (\(list)) SELECT \(list) FROM json_populate_recordset(NULL::\(table), $1::text::json)")
        bound.binds.append(rows.json)
        try await statement(bound, on: connection)
    }
}

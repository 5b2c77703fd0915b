import BrokerCore
import Foundation
import Logging
import NIOCore
import PostgresNIO

/// A job held by one process (``ImportRepository/withJob(_:_:)``): its batches, each in one
/// transaction on the job's connection with the job's cursor and counts.
public struct ImportSession: Sendable {
    let connection: PostgresConnection
    public let job: ImportRepository.Job
    let copyTimeout: Duration
    let logger: Logger

    var writer: ImportBatchWriter {
        ImportBatchWriter(tenantID: job.tenantID, jobID: job.id, dryRun: job.dryRun, copyTimeout: copyTimeout, logger: logger)
    }

    /// Writes `rows` (nothing in a dry run), advances the job and adds the batch's counts, all
    /// in one transaction. `progress` is called with the rows' outcomes before the commit (to
    /// write the batch's error lines) and says where the job now is; a batch tried again calls
    /// it again. Returns each row's outcome.
    public func write(
        _ rows: [ImportRow], progress makeProgress: ([ImportOutcome]) throws -> ImportRepository.Progress
    ) async throws -> (outcomes: [ImportOutcome], counts: ImportCounts) {
        let (tenantID, jobID) = (job.tenantID, job.id)
        return try await writer.write(rows, on: connection) { outcomes, identities, connection in
            let progress = try makeProgress(outcomes)
            var counts = ImportCounts()
            for outcome in outcomes { counts.add(outcome) }
            counts.skipped = progress.skipped
            counts.errors = progress.errors
            counts.records += progress.skipped + progress.errors
            counts.identities = identities
            try await connection.query(
                """
                UPDATE import_jobs SET cursor_offset = \(progress.cursorOffset), cursor_line = \(progress.cursorLine),
                    error_file_bytes = \(progress.errorFileBytes), records = records + \(counts.records), created = created + \(counts.created),
                    updated = updated + \(counts.updated), unchanged = unchanged + \(counts.unchanged), conflicts = conflicts + \(counts.conflicts),
                    skipped = skipped + \(counts.skipped), errors = errors + \(counts.errors), identities = identities + \(counts.identities),
                    updated_at = now()
                WHERE tenant_id = \(tenantID) AND id = \(jobID)
                """, logger: logger)
            return counts
        }
    }
}

/// Writes import batches (issue 24; decision 0047): each in one transaction, read, decided,
/// written with `COPY`, and tried again when a concurrent write took one of its keys. A job's
/// batches carry the job's id on their rows; the API's (`POST /v1/accounts/import`) carry none.
struct ImportBatchWriter: Sendable {
    let tenantID: UUID
    let jobID: UUID?
    let dryRun: Bool
    /// How long one batch's insert of its accounts or identities may take: each runs under a
    /// deadline of its own, so a batch caught by an outage fails (``DatabaseDeadlineExceeded``,
    /// the database is unavailable) instead of hanging the import; the job then resumes after
    /// its last commit.
    let copyTimeout: Duration
    let logger: Logger

    /// How often a batch is tried again when a sign-in or another import wrote one of its keys
    /// between the batch's reads and its writes (a unique violation rolls the whole batch back;
    /// the next try reads the new rows and reports the record as a conflict or unchanged).
    static let attempts = 3

    /// Runs one batch in a transaction on `connection`; `finish` runs in it last, with the
    /// outcomes and the number of identities written.
    func write<Extra>(
        _ rows: [ImportRow], on connection: PostgresConnection,
        finish: ([ImportOutcome], Int, PostgresConnection) async throws -> Extra
    ) async throws -> (outcomes: [ImportOutcome], counts: Extra) {
        var attempt = 1
        while true {
            do {
                try await connection.query("BEGIN", logger: logger)
                do {
                    // The batch's scope for its own transaction too: through a pooler in
                    // transaction mode, the session's may be another connection's.
                    try await connection.setTransactionTenantScope(logger: logger)
                    let plan = try await writeBatch(rows, on: connection)
                    let extra = try await finish(plan.outcomes, plan.identities.count, connection)
                    try await connection.query("COMMIT", logger: logger)
                    return (plan.outcomes, extra)
                } catch {
                    // Bounded too: a connection an outage cut off may never answer again.
                    let logger = logger
                    _ = try? await withDatabaseDeadline(copyTimeout) { try await connection.query("ROLLBACK", logger: logger) }
                    throw error
                }
            } catch let error where attempt < Self.attempts && error.postgresError?.isUniqueViolation == true {
                logger.debug("import batch met a concurrent write; reading again", metadata: ["attempt": "\(attempt)"])
                attempt += 1
            }
        }
    }

    private func writeBatch(_ rows: [ImportRow], on connection: PostgresConnection) async throws -> ImportClassifier.Plan {
        var classifier = ImportClassifier(
            accounts: try await existingAccounts(rows, on: connection), owners: try await owners(rows, on: connection))
        let plan = classifier.plan(rows) { UUID.timeOrdered() }
        if !dryRun {
            if !plan.accounts.isEmpty { try await copyAccounts(plan.accounts, on: connection) }
            if !plan.identities.isEmpty { try await copyIdentities(plan.identities, on: connection) }
        }
        return plan
    }

    /// The batch's accounts that exist, by external id. Each key is looked up on its own
    /// (`LATERAL … LIMIT 1` through the tenant's external-id index): as a join, the planner
    /// hashed every account of the tenant for each batch once the tenant held a few hundred
    /// thousand, and the same file again took 25.9 s for 200,000 records.
    private func existingAccounts(_ rows: [ImportRow], on connection: PostgresConnection) async throws
        -> [String: ImportClassifier.ExistingAccount]
    {
        guard !rows.isEmpty else { return [:] }
        let externalIDs = rows.map(\.externalID)
        var found: [String: ImportClassifier.ExistingAccount] = [:]
        let result = try await connection.query(
            """
            SELECT k.e, a.id, a.status FROM unnest(\(externalIDs)::text[]) AS k(e)
            CROSS JOIN LATERAL (
                SELECT a.id, a.status FROM accounts a WHERE a.tenant_id = \(tenantID) AND a.external_id = k.e LIMIT 1) a
            """, logger: logger)
        for try await (externalID, id, status) in result.decode((String, UUID, String).self) {
            found[externalID] = .init(id: id, status: AccountStatus(rawValue: status) ?? .disabled)
        }
        return found
    }

    /// The accounts the batch's identities belong to, each identity looked up by its unique
    /// key on its own (as ``existingAccounts(_:on:)``).
    private func owners(_ rows: [ImportRow], on connection: PostgresConnection) async throws -> [ImportIdentityKey: UUID] {
        let identities = rows.flatMap(\.identities)
        guard !identities.isEmpty else { return [:] }
        var owners: [ImportIdentityKey: UUID] = [:]
        let result = try await connection.query(
            """
            SELECT k.p, k.s, k.u, i.account_id
            FROM unnest(\(identities.map(\.provider))::text[], \(identities.map(\.providerScope))::text[],
                \(identities.map(\.subject))::text[]) AS k(p, s, u)
            CROSS JOIN LATERAL (
                SELECT i.account_id FROM identities i
                WHERE i.tenant_id = \(tenantID) AND i.provider = k.p AND i.provider_scope = k.s AND i.subject = k.u LIMIT 1) i
            """, logger: logger)
        for try await (provider, scope, subject, accountID) in result.decode((String, String, String, UUID).self) {
            owners[ImportIdentityKey(provider: provider, providerScope: scope, subject: subject)] = accountID
        }
        return owners
    }

    static let accountCopyColumns = [
        "id", "tenant_id", "external_id", "given_name", "family_name", "display_name", "email", "email_verified", "is_private_email",
        "status", "created_at", "import_job_id",
    ]

    private func copyAccounts(_ accounts: [(id: UUID, row: ImportRow)], on connection: PostgresConnection) async throws {
        var rows = InsertedRows(columns: Self.accountCopyColumns, capacity: accounts.count * 400)
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
        try await insert(rows, into: "accounts", columns: Self.accountCopyColumns, on: connection)
    }

    static let identityCopyColumns = [
        "id", "tenant_id", "account_id", "provider", "provider_scope", "subject", "email", "email_verified", "is_private_email",
        "provider_refresh_token_sealed", "provider_token_client_id", "created_at", "import_job_id",
    ]

    private func copyIdentities(
        _ identities: [(accountID: UUID, identity: ImportRowIdentity, createdAt: Date?)], on connection: PostgresConnection
    ) async throws {
        var rows = InsertedRows(columns: Self.identityCopyColumns, capacity: identities.count * 400)
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
        try await insert(rows, into: "identities", columns: Self.identityCopyColumns, on: connection)
    }

    /// One `INSERT` of `rows`, within ``copyTimeout``: the rows travel as one JSON parameter and
    /// `json_populate_recordset` reads them with each column's own type. Not `COPY FROM STDIN`:
    /// PostgresNIO's `copyFrom` stops the process (a `preconditionFailure`) when the server
    /// goes away between its `CopyInResponse` and the data, which a database restart during an
    /// import met (`WorkerOutageTests`). An insert also passes the tenant wall (decision 0055)
    /// as it is, where `COPY FROM` into a table under row-level security is refused.
    private func insert(_ rows: InsertedRows, into table: String, columns: [String], on connection: PostgresConnection) async throws {
        let logger = logger
        let list = columns.joined(separator: ", ")
        var bound = PostgresQuery(
            unsafeSQL: "INSERT INTO \(table) (\(list)) SELECT \(list) FROM json_populate_recordset(NULL::\(table), $1::text::json)")
        bound.binds.append(rows.json)
        let query = bound
        try await withDatabaseDeadline(copyTimeout) {
            _ = try await connection.query(query, logger: logger)
        }
    }
}

import BrokerCore
import Foundation
import Logging
import PostgresNIO

extension Database {
    public var imports: ImportRepository {
        ImportRepository(
            client: client, logger: logger, statementTimeout: configuration.statementTimeout + .seconds(1),
            sessionTarget: configuration.forSessionWork, transactionSettings: configuration.transactionSettings,
            lanes: configuration.maxConnections >= 2 ? 2 : 1)
    }
}

/// Bulk imports of existing users (issue 24; decision 0047): jobs, and batches written in one
/// transaction each with the job's cursor, so a job killed at any point resumes after its last
/// committed batch with no duplicates and no gaps.
public struct ImportRepository: Sendable {
    let client: PostgresClient
    let logger: Logger
    /// How long each statement of a batch may take before the batch is given up (see
    /// ``ImportBatchWriter/statementTimeout``).
    let statementTimeout: Duration
    /// Where a job's lock is taken (``withJob(_:_:)``).
    let sessionTarget: DatabaseConfiguration
    /// What each batch's transaction sets beside its tenant scope.
    let transactionSettings: [(String, String)]
    /// The connections a job's batches take turns on: two, or one when the pool has no more
    /// (``ImportSession``).
    var lanes = 2

    /// Where a job is and what it did so far.
    public struct Job: Sendable, Equatable {
        public var id: UUID
        public var tenantID: UUID
        public var source: String
        public var fileName: String?
        public var fileDigest: String?
        public var fileBytes: Int64?
        public var dryRun: Bool
        public var settings: [String: JSONValue]
        public var status: String
        public var stopReason: String?
        /// The byte after the last record of the last committed batch, and that record's line.
        public var cursorOffset: Int64
        public var cursorLine: Int64
        /// The length of the error file when the last batch committed: a resume cuts it back to
        /// this, so a batch that did not commit leaves no lines in it.
        public var errorFileBytes: Int64
        /// A stopped job's SHA-256 (hex) of its file's bytes before `cursorOffset` (and of their
        /// count): a resume takes a file whose part the job has read is the same, the rest fixed
        /// (decision 0064). Nil while running, and for jobs that never stopped.
        public var cursorDigest: String?
        public var counts: ImportCounts
        public var startedAt: Date
        public var updatedAt: Date
        public var finishedAt: Date?
    }

    /// A batch's place in its file, committed with its rows.
    public struct Progress: Sendable {
        public var cursorOffset: Int64
        public var cursorLine: Int64
        public var errorFileBytes: Int64
        /// Skipped records and errors of the batch (the rows' outcomes are counted here too).
        public var skipped: Int
        public var errors: Int

        public init(cursorOffset: Int64, cursorLine: Int64, errorFileBytes: Int64, skipped: Int, errors: Int) {
            self.cursorOffset = cursorOffset
            self.cursorLine = cursorLine
            self.errorFileBytes = errorFileBytes
            self.skipped = skipped
            self.errors = errors
        }
    }

    static let jobColumns = """
        id, tenant_id, source, file_name, file_digest, file_bytes, dry_run, settings::text, status, stop_reason, cursor_offset,
        cursor_line, error_file_bytes, records, created, updated, unchanged, conflicts, skipped, errors, identities, started_at,
        updated_at, finished_at, cursor_digest
        """

    public func createJob(
        tenantID: UUID, source: String, fileName: String?, fileDigest: String?, fileBytes: Int64?, dryRun: Bool,
        settings: [String: JSONValue]
    ) async throws -> Job {
        let id = UUID.timeOrdered()
        let rows = try await client.rows(
            """
            INSERT INTO import_jobs (id, tenant_id, source, file_name, file_digest, file_bytes, dry_run, settings)
            VALUES (\(id), \(tenantID), \(source), \(fileName), \(fileDigest), \(fileBytes), \(dryRun), \(ProviderConfigRepository.settingsText(settings))::jsonb)
            RETURNING \(unescaped: Self.jobColumns)
            """, logger: logger)
        guard let row = rows.first else { throw StorageError.configuration("The import job was not written.") }
        return try Self.decodeJob(row)
    }

    /// A job by id; with a tenant, only that tenant's.
    public func job(id: UUID, tenantID: UUID?) async throws -> Job? {
        let rows = try await client.rows(
            """
            SELECT \(unescaped: Self.jobColumns) FROM import_jobs
            WHERE id = \(id) AND (\(tenantID)::uuid IS NULL OR tenant_id = \(tenantID))
            """, logger: logger)
        return try rows.first.map(Self.decodeJob)
    }

    /// The tenant's jobs, newest first.
    public func jobs(tenantID: UUID, limit: Int = 100) async throws -> [Job] {
        try await client.rows(
            """
            SELECT \(unescaped: Self.jobColumns) FROM import_jobs WHERE tenant_id = \(tenantID)
            ORDER BY started_at DESC, id DESC LIMIT \(limit)
            """, logger: logger
        ).map(Self.decodeJob)
    }

    /// The tenant's unfinished (running or stopped) real job of this source and file, if any:
    /// running the same file again continues it.
    public func unfinishedJob(tenantID: UUID, source: String, fileDigest: String) async throws -> Job? {
        let rows = try await client.rows(
            """
            SELECT \(unescaped: Self.jobColumns) FROM import_jobs
            WHERE tenant_id = \(tenantID) AND file_digest = \(fileDigest) AND source = \(source) AND status IN ('running', 'stopped')
                AND NOT dry_run
            ORDER BY started_at DESC LIMIT 1
            """, logger: logger)
        return try rows.first.map(Self.decodeJob)
    }

    /// Runs `body` with the job held: a session advisory lock on the job, on a connection of its
    /// own where the work that holds a session connects (``DatabaseConfiguration/forSessionWork``,
    /// `BROKER_DB_SESSION_URL`; decision 0086), which PostgreSQL drops when the connection ends
    /// (a killed import leaves no lock behind); and the pool's connections its batches take
    /// turns on (``ImportSession``). Throws ``ImportJobBusy`` when another process holds it.
    public func withJob<T: Sendable>(
        _ job: Job, _ body: (ImportSession) async throws -> T
    ) async throws -> T {
        let key = "import_job:" + job.id.lowercasedString
        let connection = try await withDatabaseDeadline(sessionTarget.connectTimeout + statementTimeout) { [logger, sessionTarget] in
            try await PostgresConnection.connect(configuration: try sessionTarget.connectionConfiguration(), id: 0, logger: logger)
        }
        // Bounded: a connection an outage cut off may never answer again (the lock then goes
        // with the connection, which is closed in any case).
        let (logger, timeout) = (logger, statementTimeout)
        let release = { @Sendable in
            _ = try? await withDatabaseDeadline(timeout) {
                try await connection.query("SELECT pg_advisory_unlock(hashtextextended(\(key), 0))", logger: logger)
            }
            try? await connection.close()
        }
        do {
            let locked =
                try await withDatabaseDeadline(timeout) {
                    try await connection.query("SELECT pg_try_advisory_lock(hashtextextended(\(key), 0))", logger: logger)
                        .collect().first?.decode(Bool.self)
                } ?? false
            guard locked else { throw ImportJobBusy() }
            func run(_ lanes: [PostgresConnection]) async throws -> T {
                let session = ImportSession(
                    lanes: lanes, job: job, statementTimeout: timeout, transactionSettings: transactionSettings, logger: logger)
                do {
                    let result = try await body(session)
                    await session.abandonAll()
                    return result
                } catch {
                    await session.abandonAll()
                    throw error
                }
            }
            // A second connection for the batch after the one in flight (decision 0061),
            // unless the pool has only one.
            let result = try await client.withScopedConnection(logger: logger) { first in
                lanes < 2
                    ? try await run([first])
                    : try await client.withScopedConnection(logger: logger) { second in try await run([first, second]) }
            }
            await release()
            return result
        } catch {
            await release()
            throw error
        }
    }

    /// Writes `rows` in one transaction outside any job (`POST /v1/accounts/import`): the same
    /// rules as a job's batch, each record all or nothing; the rows carry no job id.
    public func write(_ rows: [ImportRow], tenantID: UUID) async throws -> [ImportOutcome] {
        let writer = ImportBatchWriter(
            tenantID: tenantID, jobID: nil, dryRun: false, statementTimeout: statementTimeout, logger: logger,
            transactionSettings: transactionSettings)
        return try await client.withScopedConnection(logger: logger) { connection in
            try await writer.write(rows, on: connection) { _, _, _ in () }.outcomes
        }
    }

    /// Ends a job: `completed`, or `stopped` with the reason (resumable) and the digest of the
    /// bytes it has read (``Job/cursorDigest``). A real job that completes writes one
    /// `import.completed` event with its counts (imported accounts emit no event each).
    public func finish(jobID: UUID, tenantID: UUID, status: String, reason: String?, cursorDigest: String? = nil) async throws {
        _ = try await client.rows(
            """
            WITH done AS (
                UPDATE import_jobs SET status = \(status), stop_reason = \(reason), cursor_digest = \(cursorDigest), updated_at = now(),
                    finished_at = CASE WHEN \(status) = 'completed' THEN now() ELSE finished_at END
                WHERE tenant_id = \(tenantID) AND id = \(jobID)
                RETURNING *
            )
            INSERT INTO events_outbox (tenant_id, account_id, event_type, payload)
            SELECT tenant_id, NULL, 'import.completed', jsonb_build_object(
                'job_id', id::text, 'source', source, 'records', records, 'created', created, 'updated', updated,
                'unchanged', unchanged, 'conflicts', conflicts, 'skipped', skipped, 'errors', errors, 'identities', identities)
            FROM done WHERE status = 'completed' AND NOT dry_run
            """, logger: logger)
    }

    /// Reopens a stopped job to run again, with its settings replaced when given, and with the
    /// digest and length of the file it continues with when that file was fixed after the part
    /// the job has read.
    public func resume(jobID: UUID, tenantID: UUID, settings: [String: JSONValue]?, file: (digest: String, bytes: Int64)? = nil)
        async throws
    {
        _ = try await client.rows(
            """
            UPDATE import_jobs SET status = 'running', stop_reason = NULL, cursor_digest = NULL, updated_at = now(),
                file_digest = coalesce(\(file?.digest), file_digest), file_bytes = coalesce(\(file?.bytes), file_bytes),
                settings = coalesce(\(settings.map(ProviderConfigRepository.settingsText))::jsonb, settings)
            WHERE tenant_id = \(tenantID) AND id = \(jobID) AND status IN ('running', 'stopped')
            """, logger: logger)
    }

    /// One account as `broker export users` writes it: its columns, and its identities as JSON
    /// (`[{"provider", "subject", "provider_scope", "email"?, "email_verified", "is_private_email"}]`).
    public struct ExportedAccount: Sendable {
        public let id: UUID
        public let externalID: String?
        public let email: String?
        public let emailVerified: Bool
        public let name: PersonName
        public let status: AccountStatus
        public let createdAt: Date
        public let identitiesJSON: String
    }

    /// The tenant's accounts after `after` in id order (deleted ones left out), `limit` at a
    /// time: an export reads the whole tenant in pages, never all at once.
    public func exportPage(tenantID: UUID, after: UUID?, limit: Int) async throws -> [ExportedAccount] {
        let after = after ?? UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        return try await client.rows(
            """
            SELECT a.id, a.external_id, a.email, a.email_verified, a.given_name, a.family_name, a.status, a.created_at,
                coalesce((
                    SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
                        'provider', i.provider, 'subject', i.subject, 'provider_scope', i.provider_scope, 'email', i.email,
                        'email_verified', i.email_verified, 'is_private_email', i.is_private_email)) ORDER BY i.provider, i.provider_scope, i.subject)
                    FROM identities i WHERE i.tenant_id = a.tenant_id AND i.account_id = a.id), '[]'::jsonb)::text
            FROM accounts a
            WHERE a.tenant_id = \(tenantID) AND a.status <> 'deleted' AND a.id > \(after)
            ORDER BY a.id LIMIT \(limit)
            """, logger: logger
        ).map { row in
            var reader = RowReader(row)
            let (id, externalID, email, emailVerified): (UUID, String?, String?, Bool) =
                (try reader.next(), try reader.next(), try reader.next(), try reader.next())
            let name = PersonName(givenName: try reader.next(), familyName: try reader.next())
            let status = AccountStatus(rawValue: try reader.next(String.self)) ?? .disabled
            return ExportedAccount(
                id: id, externalID: externalID, email: email, emailVerified: emailVerified, name: name, status: status,
                createdAt: try reader.next(), identitiesJSON: try reader.next())
        }
    }

    /// What a rollback removed and kept.
    public struct Rollback: Sendable, Equatable {
        public var accountsRemoved = 0
        public var identitiesRemoved = 0
        /// Accounts the job created that have signed in since (kept unless forced).
        public var accountsKept = 0
        /// Identities the job created that stay: on kept accounts, or signed in with since.
        public var identitiesKept = 0
    }

    /// Removes what job `jobID` created (issue 24): its accounts with their identities, and the
    /// identities it added to accounts that existed. An account that has signed in since the
    /// import stays, with its identities, and so does an added identity that was signed in
    /// with, unless `force`. A dry run reports and changes nothing. The job becomes
    /// `rolled_back` with an audit row.
    public func rollback(jobID: UUID, tenantID: UUID, force: Bool, dryRun: Bool, actor: String) async throws -> Rollback {
        try await client.withScopedConnection(logger: logger) { connection in
            try await connection.query("BEGIN", logger: logger)
            do {
                // Its own scope for its transaction: through a pooler in transaction mode, the
                // session's may be another connection's.
                try await connection.setTransactionTenantScope(settings: transactionSettings, logger: logger)
                let row = try await connection.query(
                    """
                    WITH kept AS MATERIALIZED (
                        SELECT a.id FROM accounts a
                        WHERE a.tenant_id = \(tenantID) AND a.import_job_id = \(jobID) AND NOT \(force)
                            AND (a.last_seen_at IS NOT NULL
                                OR EXISTS (SELECT 1 FROM sessions s WHERE s.tenant_id = a.tenant_id AND s.account_id = a.id))
                    ), gone_identities AS (
                        DELETE FROM identities i
                        WHERE i.tenant_id = \(tenantID) AND i.import_job_id = \(jobID) AND i.account_id NOT IN (SELECT id FROM kept)
                            AND (\(force) OR (i.last_sign_in_at IS NULL AND NOT EXISTS (
                                SELECT 1 FROM sessions s WHERE s.tenant_id = i.tenant_id AND s.account_id = i.account_id AND s.identity_id = i.id)))
                        RETURNING i.id
                    ), gone_accounts AS (
                        DELETE FROM accounts a
                        WHERE a.tenant_id = \(tenantID) AND a.import_job_id = \(jobID) AND a.id NOT IN (SELECT id FROM kept)
                        RETURNING a.id
                    ), marked AS (
                        UPDATE import_jobs SET status = 'rolled_back', updated_at = now()
                        WHERE tenant_id = \(tenantID) AND id = \(jobID) AND NOT \(dryRun)
                    )
                    SELECT (SELECT count(*) FROM gone_accounts)::int8, (SELECT count(*) FROM gone_identities)::int8,
                        (SELECT count(*) FROM kept)::int8,
                        ((SELECT count(*) FROM identities WHERE tenant_id = \(tenantID) AND import_job_id = \(jobID))
                            - (SELECT count(*) FROM gone_identities))::int8
                    """, logger: logger
                ).collect().first
                var result = Rollback()
                if let row {
                    let (accounts, identities, kept, identitiesKept) = try row.decode((Int, Int, Int, Int).self)
                    result = Rollback(
                        accountsRemoved: accounts, identitiesRemoved: identities, accountsKept: kept, identitiesKept: identitiesKept)
                }
                if dryRun {
                    try await connection.query("ROLLBACK", logger: logger)
                } else {
                    try await AuditLogRepository.append(
                        tenantID: tenantID, actor: actor, action: "import.rolled_back", target: jobID.lowercasedString,
                        details: [
                            "accounts_removed": .int(result.accountsRemoved), "identities_removed": .int(result.identitiesRemoved),
                            "accounts_kept": .int(result.accountsKept), "identities_kept": .int(result.identitiesKept),
                            "force": .bool(force),
                        ],
                        on: connection, logger: logger)
                    try await connection.query("COMMIT", logger: logger)
                }
                return result
            } catch {
                _ = try? await connection.query("ROLLBACK", logger: logger)
                throw error
            }
        }
    }

    static func decodeJob(_ row: PostgresRow) throws -> Job {
        var reader = RowReader(row)
        let (id, tenantID, source, fileName, fileDigest, fileBytes, dryRun): (UUID, UUID, String, String?, String?, Int64?, Bool) =
            (
                try reader.next(), try reader.next(), try reader.next(), try reader.next(), try reader.next(), try reader.next(),
                try reader.next()
            )
        let settingsText: String = try reader.next()
        let (status, stopReason, cursorOffset, cursorLine, errorFileBytes): (String, String?, Int64, Int64, Int64) =
            (try reader.next(), try reader.next(), try reader.next(), try reader.next(), try reader.next())
        var counts = ImportCounts()
        counts.records = Int(try reader.next(Int64.self))
        counts.created = Int(try reader.next(Int64.self))
        counts.updated = Int(try reader.next(Int64.self))
        counts.unchanged = Int(try reader.next(Int64.self))
        counts.conflicts = Int(try reader.next(Int64.self))
        counts.skipped = Int(try reader.next(Int64.self))
        counts.errors = Int(try reader.next(Int64.self))
        counts.identities = Int(try reader.next(Int64.self))
        let (startedAt, updatedAt, finishedAt): (Date, Date, Date?) = (try reader.next(), try reader.next(), try reader.next())
        let cursorDigest: String? = try reader.next()
        let settings = (try? JSONValue.parse(Array(settingsText.utf8)))?.object ?? [:]
        return Job(
            id: id, tenantID: tenantID, source: source, fileName: fileName, fileDigest: fileDigest, fileBytes: fileBytes, dryRun: dryRun,
            settings: settings, status: status, stopReason: stopReason, cursorOffset: cursorOffset, cursorLine: cursorLine,
            errorFileBytes: errorFileBytes, cursorDigest: cursorDigest, counts: counts, startedAt: startedAt, updatedAt: updatedAt,
            finishedAt: finishedAt)
    }
}

/// Another process is running this job.
public struct ImportJobBusy: Error {}

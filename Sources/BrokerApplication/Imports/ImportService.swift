import BrokerCore
import Crypto
import Foundation
import Logging
import Storage

/// Bulk import of existing users from a file (issue 24; decision 0047): reads the file in
/// bounded memory, resolves each record against the tenant's providers, and writes batches,
/// each in one transaction with the job's cursor, so that a killed import resumes where its
/// last batch committed. `broker import users` runs it.
package struct ImportService: Sendable {
    let database: Database
    let secrets: SecretBox
    let logger: Logger

    package init(database: Database, secrets: SecretBox, logger: Logger) {
        self.database = database
        self.secrets = secrets
        self.logger = logger
    }

    package struct Options: Sendable {
        package var source: ImportSource
        package var path: String
        package var dryRun = false
        package var resumeJobID: UUID?
        /// Given again on a resume, these replace the job's; nil keeps them.
        package var appleTeam: String?
        package var providerMap: [String: String]?
        package var maxErrors: Int?
        package var batchSize = 2_000

        package init(source: ImportSource, path: String) {
            self.source = source
            self.path = path
        }
    }

    /// Where a running import is.
    package struct Progress: Sendable {
        package let bytesRead: Int64
        package let fileBytes: Int64
        package let counts: ImportCounts
    }

    package struct Report: Sendable {
        package let job: ImportRepository.Job
        /// The job was continued (`--resume`, or the same file while its job was unfinished).
        package let resumed: Bool
        package let errorFile: String
        /// Why the job stopped before the end of the file (too many errors); nil when it completed.
        package var stopReason: String? { job.status == "stopped" ? job.stopReason : nil }
    }

    static let defaultMaxErrors = 1_000

    package func run(tenant: Tenant, options: Options, progress: @Sendable (Progress) -> Void = { _ in }) async throws -> Report {
        let (digest, fileBytes) = try Self.digest(of: options.path)
        var resumed = false
        var job: ImportRepository.Job
        var given: [String: JSONValue] = [:]
        if let team = options.appleTeam { given["apple_team"] = .string(team) }
        if let map = options.providerMap { given["map_provider"] = .object(map.mapValues { .string($0) }) }
        if let maxErrors = options.maxErrors { given["max_errors"] = .number(Double(maxErrors)) }

        if let id = options.resumeJobID {
            guard !options.dryRun else {
                throw BrokerError.invalidArgument("A dry run is never continued: run --dry-run without --resume.")
            }
            guard let found = try await database.imports.job(id: id, tenantID: tenant.id) else {
                throw BrokerError(
                    code: "import_job_not_found", kind: .notFound, title: "Import job not found",
                    detail: "Tenant '\(tenant.slug)' has no import job \(id.lowercasedString).",
                    hint: "List the tenant's jobs with: broker import list --tenant \(tenant.slug)")
            }
            try Self.checkResumable(found, digest: digest, source: options.source)
            job = found
            resumed = true
        } else if !options.dryRun,
            let unfinished = try await database.imports.unfinishedJob(tenantID: tenant.id, source: options.source.rawValue, fileDigest: digest)
        {
            job = unfinished
            resumed = true
        } else {
            job = try await database.imports.createJob(
                tenantID: tenant.id, source: options.source.rawValue, fileName: (options.path as NSString).lastPathComponent,
                fileDigest: digest, fileBytes: fileBytes, dryRun: options.dryRun, settings: given)
        }
        if resumed {
            var settings = job.settings
            for (key, value) in given { settings[key] = value }
            try await database.imports.resume(jobID: job.id, tenantID: tenant.id, settings: settings)
            job.settings = settings
        }

        let map = job.settings["map_provider"]?.object?.compactMapValues(\.string) ?? [:]
        let resolver = try await ImportProviderResolver.load(
            tenant: tenant, database: database, secrets: secrets, appleTeam: job.settings["apple_team"]?.string, map: map)
        let maxErrors = job.settings["max_errors"]?.integer(in: 0...Int.max) ?? Self.defaultMaxErrors
        let errorFile = try ImportErrorFile(path: options.path + ".errors.jsonl", length: resumed ? job.errorFileBytes : 0)
        let reader = try ImportFileReader(
            path: options.path, layout: options.source == .firebase ? .usersArray : .lines, offset: job.cursorOffset,
            line: max(1, Int(job.cursorLine)))
        defer { reader.close() }

        let startJob = job
        let source = options.source
        let batchSize = max(1, options.batchSize)
        let final: (counts: ImportCounts, stop: String?)
        do {
            final = try await run(
                startJob, reader: reader, errorFile: errorFile, resolver: resolver, source: source, batchSize: batchSize,
                maxErrors: maxErrors, fileBytes: fileBytes, progress: progress)
        } catch is ImportJobBusy {
            throw BrokerError(
                code: "import_job_running", kind: .conflict, title: "Import job running",
                detail: "Job \(job.id.lowercasedString) is being run by another process.",
                hint: "Wait for it (broker import show \(job.id.lowercasedString)), or stop that process first.")
        } catch let error as BrokerError {
            throw error
        } catch {
            // The database or the file failed mid-job: every committed batch stays, the job
            // continues after the last one.
            logger.error(
                "import interrupted", metadata: ["job": "\(job.id.lowercasedString)", "error": "\(String(reflecting: type(of: error)))"])
            throw BrokerError(
                code: "import_interrupted", kind: .unavailable, title: "Import interrupted",
                detail: "Job \(job.id.lowercasedString) was interrupted (\(Self.describe(error))); the batches committed before it stay.",
                hint: "Run the same command again, or add --resume \(job.id.lowercasedString): it continues after the last committed batch.")
        }
        let status = final.stop == nil ? "completed" : "stopped"
        try await database.imports.finish(jobID: job.id, tenantID: tenant.id, status: status, reason: final.stop)
        logger.notice(
            "import finished",
            metadata: [
                "tenant": "\(tenant.slug)", "job": "\(job.id.lowercasedString)", "status": "\(status)", "records": "\(final.counts.records)",
                "created": "\(final.counts.created)", "errors": "\(final.counts.errors)",
            ])
        let finished = try await database.imports.job(id: job.id, tenantID: tenant.id) ?? job
        return Report(job: finished, resumed: resumed, errorFile: errorFile.path)
    }

    /// The batches of a held job, until the file ends or `maxErrors` is reached. Three batches
    /// are on their way at once (decision 0061): the next one is read and resolved in a task of
    /// its own, the one after the current is checked and inserted on the session's second
    /// connection, and the current one commits. Each commits in file order, with its error
    /// lines written just before; after the batch that reaches `maxErrors`, none does.
    private func run(
        _ startJob: ImportRepository.Job, reader start: ImportFileReader, errorFile: ImportErrorFile, resolver: ImportProviderResolver,
        source: ImportSource, batchSize: Int, maxErrors: Int, fileBytes: Int64, progress: @Sendable (Progress) -> Void
    ) async throws -> (counts: ImportCounts, stop: String?) {
        try await database.imports.withJob(startJob) { session in
            var totals = startJob.counts
            var upcoming = Task { try Self.readBatch(from: start, size: batchSize, source: source, resolver: resolver) }
            // Begun, not yet committed.
            var waiting: (batch: ImportBatchInFlight, read: Batch)?
            do {
                while true {
                    let (pending, rest) = try await upcoming.value
                    var begun: (batch: ImportBatchInFlight, read: Batch)?
                    if pending.read > 0 {
                        upcoming = Task { try Self.readBatch(from: rest, size: batchSize, source: source, resolver: resolver) }
                        begun = (session.begin(pending.rows), pending)
                    }
                    if let (batch, read) = waiting {
                        waiting = begun
                        let outcomes = try await batch.outcomes()
                        let length = try errorFile.writeBatch(read.entries(with: outcomes))
                        let counts = try await batch.commit(
                            ImportRepository.Progress(
                                cursorOffset: read.endOffset, cursorLine: Int64(read.endLine), errorFileBytes: length,
                                skipped: read.skipped, errors: read.errors))
                        errorFile.commit()
                        totals = totals + counts
                        progress(Progress(bytesRead: read.endOffset, fileBytes: fileBytes, counts: totals))
                        if totals.errors > 0 && totals.errors >= maxErrors {
                            // The batches after it are not written: the job's cursor is where a resume starts.
                            await begun?.batch.abandon()
                            _ = try? await upcoming.value
                            return (totals, "stopped after \(totals.errors) errors (--max-errors \(maxErrors))")
                        }
                    } else {
                        waiting = begun
                    }
                    if begun == nil { return (totals, nil) }
                }
            } catch {
                await session.abandonAll()
                _ = try? await upcoming.value
                throw error
            }
        }
    }

    /// Up to `size` records from `reader`, resolved; the reader comes back where it stopped.
    static func readBatch(from reader: ImportFileReader, size: Int, source: ImportSource, resolver: ImportProviderResolver) throws
        -> (Batch, ImportFileReader)
    {
        var reader = reader
        var batch = Batch()
        while batch.rows.count < size, let user = try reader.next() {
            batch.add(user, item: Self.item(user.bytes, source: source), resolver: resolver)
        }
        return (batch, reader)
    }

    /// The records read for one transaction, with the lines that were not records.
    struct Batch: Sendable {
        var rows: [ImportRow] = []
        var rowLines: [Int] = []
        var notImported: [ImportErrorFile.Entry] = []
        var skipped = 0
        var errors = 0
        var read = 0
        var endOffset: Int64 = 0
        var endLine = 0

        mutating func add(_ user: ImportFileReader.User, item: ImportItem, resolver: ImportProviderResolver) {
            read += 1
            endOffset = user.endOffset
            endLine = user.endLine
            switch item {
            case .record(let record):
                switch resolver.resolve(record) {
                case .success(let row):
                    rows.append(row)
                    rowLines.append(user.line)
                case .failure(let failure):
                    errors += 1
                    notImported.append(.init(line: user.line, kind: .error, externalID: record.externalID, reason: failure.reason))
                }
            case .skipped(let externalID, let reason):
                skipped += 1
                notImported.append(.init(line: user.line, kind: .skipped, externalID: externalID, reason: reason))
            case .error(let reason):
                errors += 1
                notImported.append(.init(line: user.line, kind: .error, externalID: nil, reason: reason))
            }
        }

        /// Every line not imported, in line order: the batch's errors and skips, and the
        /// records the database found in conflict.
        func entries(with outcomes: [ImportOutcome]) -> [ImportErrorFile.Entry] {
            var entries = notImported
            for (index, outcome) in outcomes.enumerated() {
                guard case .conflict(_, let reason) = outcome else { continue }
                entries.append(.init(line: rowLines[index], kind: .conflict, externalID: rows[index].externalID, reason: reason))
            }
            return entries.sorted { $0.line < $1.line }
        }
    }

    /// One user's bytes as the source's item; bytes that are not JSON are an error.
    static func item(_ bytes: [UInt8], source: ImportSource) -> ImportItem {
        guard let value = try? JSONValue.parse(bytes, maxDepth: 16) else { return .error("malformed JSON") }
        return source.item(from: value)
    }

    static func checkResumable(_ job: ImportRepository.Job, digest: String, source: ImportSource) throws {
        guard !job.dryRun else { throw BrokerError.invalidArgument("Job \(job.id.lowercasedString) was a dry run; a dry run is never continued.") }
        guard job.status == "running" || job.status == "stopped" else {
            throw BrokerError.invalidArgument(
                "Job \(job.id.lowercasedString) is \(job.status); only a running or stopped job continues. Run the file again for a new job.")
        }
        guard job.fileDigest == digest, job.source == source.rawValue else {
            throw BrokerError.invalidArgument(
                "Job \(job.id.lowercasedString) imported another file (or format): resume it with the same file and --from \(job.source).")
        }
    }

    /// The file's SHA-256 (hex) and length, read in chunks.
    static func digest(of path: String) throws -> (String, Int64) {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw BrokerError.invalidArgument("Cannot read \(path): check the path and its permissions.")
        }
        defer { try? handle.close() }
        var hash = SHA256()
        var length: Int64 = 0
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
            hash.update(data: chunk)
            length += Int64(chunk.count)
        }
        return (Hex.encode(hash.finalize()), length)
    }

    /// What failed, without the values of a query.
    static func describe(_ error: any Error) -> String {
        if let failure = error as? ImportFileReader.Failure { return failure.description }
        if let summary = DatabaseFailureSummary.of(error) { return summary }
        return String(describing: type(of: error))
    }
}

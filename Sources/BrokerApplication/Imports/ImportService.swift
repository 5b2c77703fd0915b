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
        /// Once requested (the operator's SIGTERM or SIGINT), the batch in flight commits and the
        /// job stops there, resumable (issue 39 D11).
        package var stop: GracefulStop?

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
        /// The job stopped because the file breaks (a Firebase export cut off), not on errors.
        package var stoppedOnFile = false
        /// The job stopped because the operator stopped the command (its last batch committed).
        package var stoppedBySignal = false
        /// Why the job stopped before the end of the file (too many errors, or the file breaks);
        /// nil when it completed.
        package var stopReason: String? { job.status == "stopped" ? job.stopReason : nil }
    }

    /// Why a job stops before the end of its file; the job stays resumable.
    enum Stop: Sendable {
        /// The bad record on `line` is one more than `--max-errors` allows: the job stops before
        /// it, so a resume reads it again.
        case maxErrors(line: Int, reason: String)
        /// The file's structure breaks (truncated): everything before it is imported.
        case file(ImportFileReader.Failure)
        /// The operator stopped the command: the batch in flight committed, nothing after it
        /// was begun.
        case signal
    }

    static let defaultMaxErrors = 1_000

    package func run(tenant: Tenant, options: Options, progress: @Sendable (Progress) -> Void = { _ in }) async throws -> Report {
        let (digest, fileBytes) = try Self.digest(of: options.path)
        var resumed = false
        var fileChanged = false
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
            let changed = try Self.checkResumable(found, digest: digest, source: options.source, path: options.path)
            job = found
            resumed = true
            if changed {
                // The lines it has read are the same; the rest was fixed: the job continues
                // with this file (and running it again finds the job).
                job.fileDigest = digest
                job.fileBytes = fileBytes
                fileChanged = true
            }
        } else if !options.dryRun,
            let unfinished = try await database.imports.unfinishedJob(
                tenantID: tenant.id, source: options.source.rawValue, fileDigest: digest)
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
            try await database.imports.resume(
                jobID: job.id, tenantID: tenant.id, settings: settings, file: fileChanged ? (digest, fileBytes) : nil)
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
        let final: (counts: ImportCounts, stop: Stop?)
        do {
            final = try await run(
                startJob, reader: reader, errorFile: errorFile, resolver: resolver, source: source, batchSize: batchSize,
                maxErrors: maxErrors, fileBytes: fileBytes, stop: options.stop, progress: progress)
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
                hint: "Run the same command again, or add --resume \(job.id.lowercasedString): it continues after the last committed batch."
            )
        }
        let status = final.stop == nil ? "completed" : "stopped"
        var cursorDigest: String?
        if final.stop != nil, let stopped = try await database.imports.job(id: job.id, tenantID: tenant.id) {
            // What a resume may not change: the bytes the job has read (decision 0064).
            cursorDigest = try Self.digest(of: options.path, upTo: stopped.cursorOffset)
        }
        let reason = final.stop.map { Self.describe($0, errors: final.counts.errors, maxErrors: maxErrors) }
        try await database.imports.finish(jobID: job.id, tenantID: tenant.id, status: status, reason: reason, cursorDigest: cursorDigest)
        logger.notice(
            "import finished",
            metadata: [
                "tenant": "\(tenant.slug)", "job": "\(job.id.lowercasedString)", "status": "\(status)",
                "records": "\(final.counts.records)",
                "created": "\(final.counts.created)", "errors": "\(final.counts.errors)",
            ])
        let finished = try await database.imports.job(id: job.id, tenantID: tenant.id) ?? job
        var report = Report(job: finished, resumed: resumed, errorFile: errorFile.path)
        if case .file = final.stop { report.stoppedOnFile = true }
        if case .signal = final.stop { report.stoppedBySignal = true }
        return report
    }

    /// A stop as the job's `stop_reason` says it.
    static func describe(_ stop: Stop, errors: Int, maxErrors: Int) -> String {
        switch stop {
        case .maxErrors(let line, let reason):
            "stopped after \(errors) errors (--max-errors \(maxErrors)): line \(line) is the next bad record (\(reason))"
        case .file(let failure):
            "stopped where the file breaks: \(failure.description)"
        case .signal:
            "stopped by the operator (SIGTERM or SIGINT) after its last committed batch"
        }
    }

    /// The batches of a held job, until the file ends, `maxErrors` is exceeded or the file
    /// breaks. Three batches are on their way at once (decision 0061): the next one is read and
    /// resolved in a task of its own, the one after the current is checked and inserted on the
    /// session's second connection, and the current one commits. Each commits in file order,
    /// with its error lines written just before. The batch that meets the bad record one over
    /// `maxErrors`, or the place where the file breaks, ends just before it and is the last one
    /// read: every record before it is written, none after it (issue 39 F17).
    private func run(
        _ startJob: ImportRepository.Job, reader start: ImportFileReader, errorFile: ImportErrorFile, resolver: ImportProviderResolver,
        source: ImportSource, batchSize: Int, maxErrors: Int, fileBytes: Int64, stop: GracefulStop?, progress: @Sendable (Progress) -> Void
    ) async throws -> (counts: ImportCounts, stop: Stop?) {
        try await database.imports.withJob(startJob) { session in
            var totals = startJob.counts
            // Errors of the batches read so far, committed or not: what the next batch may still meet.
            var errorsRead = startJob.counts.errors
            let firstBudget = max(0, maxErrors - errorsRead)
            var upcoming: Task<(Batch, ImportFileReader), any Error>? = Task {
                try Self.readBatch(from: start, size: batchSize, source: source, resolver: resolver, errorBudget: firstBudget)
            }
            // Begun, not yet committed.
            var waiting: (batch: ImportBatchInFlight, read: Batch)?
            // A stop met before any record of the batch read last.
            var stopAtEnd: Stop?
            // Commits a begun batch with its error lines, in file order.
            func commit(_ batch: ImportBatchInFlight, _ read: Batch) async throws {
                let outcomes = try await batch.outcomes()
                let length = try errorFile.writeBatch(read.entries(with: outcomes))
                let counts = try await batch.commit(
                    ImportRepository.Progress(
                        cursorOffset: read.endOffset, cursorLine: Int64(read.endLine), errorFileBytes: length,
                        skipped: read.skipped, errors: read.errors))
                errorFile.commit()
                totals = totals + counts
                progress(Progress(bytesRead: read.endOffset, fileBytes: fileBytes, counts: totals))
            }
            do {
                while true {
                    if stop?.isRequested == true {
                        // The operator's stop (issue 39 D11): nothing new is begun, the batch
                        // begun last commits, and the job stops after it.
                        _ = try? await upcoming?.value
                        upcoming = nil
                        guard let (batch, read) = waiting else { return (totals, .signal) }
                        waiting = nil
                        try await commit(batch, read)
                        return (totals, read.stop ?? .signal)
                    }
                    var begun: (batch: ImportBatchInFlight, read: Batch)?
                    if let next = upcoming {
                        let (pending, rest) = try await next.value
                        upcoming = nil
                        errorsRead += pending.errors
                        if pending.stop == nil && pending.read > 0 {
                            let budget = max(0, maxErrors - errorsRead)
                            upcoming = Task {
                                try Self.readBatch(from: rest, size: batchSize, source: source, resolver: resolver, errorBudget: budget)
                            }
                        }
                        if pending.read > 0 { begun = (session.begin(pending.rows), pending) } else { stopAtEnd = pending.stop }
                    }
                    if let (batch, read) = waiting {
                        waiting = begun
                        try await commit(batch, read)
                        // Nothing is read after a batch that stops.
                        if let stop = read.stop { return (totals, stop) }
                    } else {
                        waiting = begun
                    }
                    if begun == nil && waiting == nil { return (totals, stopAtEnd) }
                }
            } catch {
                await session.abandonAll()
                _ = try? await upcoming?.value
                throw error
            }
        }
    }

    /// Up to `size` records from `reader`, resolved; the reader comes back where it stopped.
    /// The batch holds at most `errorBudget` bad records: at the one after, it ends just before
    /// that record and says why (``Batch/stop``), and so it does where the file breaks.
    static func readBatch(
        from reader: ImportFileReader, size: Int, source: ImportSource, resolver: ImportProviderResolver, errorBudget: Int
    ) throws -> (Batch, ImportFileReader) {
        var reader = reader
        var batch = Batch(endOffset: reader.offset, endLine: reader.currentLine)
        do {
            while batch.rows.count < size, let user = try reader.next() {
                let item = user.oversized ? ImportItem.error(Self.oversizedReason) : Self.item(user.bytes, source: source)
                let entry = Batch.resolve(item, resolver: resolver)
                if case .error(_, let reason) = entry, batch.errors >= errorBudget {
                    batch.stop = .maxErrors(line: user.line, reason: reason)
                    break
                }
                batch.add(user, entry)
            }
        } catch let failure as ImportFileReader.Failure {
            batch.stop = .file(failure)
        }
        return (batch, reader)
    }

    static let oversizedReason = "the record is longer than 1 MiB (\(ImportFileReader.maxUserBytes) bytes); it was not read"

    /// The records read for one transaction, with the lines that were not records.
    struct Batch: Sendable {
        var rows: [ImportRow] = []
        var rowLines: [Int] = []
        var notImported: [ImportErrorFile.Entry] = []
        var skipped = 0
        var errors = 0
        var read = 0
        /// Where the batch ends: after its last record, or where it started when it has none.
        var endOffset: Int64
        var endLine: Int
        /// Why reading stopped at the end of this batch, before the end of the file.
        var stop: Stop?

        init(endOffset: Int64 = 0, endLine: Int = 0) {
            self.endOffset = endOffset
            self.endLine = endLine
        }

        /// What one user becomes.
        enum Entry {
            case row(ImportRow)
            case skipped(externalID: String?, reason: String)
            case error(externalID: String?, reason: String)
        }

        static func resolve(_ item: ImportItem, resolver: ImportProviderResolver) -> Entry {
            switch item {
            case .record(let record):
                switch resolver.resolve(record) {
                case .success(let row): .row(row)
                case .failure(let failure): .error(externalID: record.externalID, reason: failure.reason)
                }
            case .skipped(let externalID, let reason): .skipped(externalID: externalID, reason: reason)
            case .error(let reason): .error(externalID: nil, reason: reason)
            }
        }

        mutating func add(_ user: ImportFileReader.User, _ entry: Entry) {
            read += 1
            endOffset = user.endOffset
            endLine = user.endLine
            switch entry {
            case .row(let row):
                rows.append(row)
                rowLines.append(user.line)
            case .skipped(let externalID, let reason):
                skipped += 1
                notImported.append(.init(line: user.line, kind: .skipped, externalID: externalID, reason: reason))
            case .error(let externalID, let reason):
                errors += 1
                notImported.append(.init(line: user.line, kind: .error, externalID: externalID, reason: reason))
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

    /// Whether `job` may continue with the file at `path` (digest `digest`); true when the file
    /// changed after the part the job has read, which is then the file the job continues
    /// with. A stopped job records a digest of the bytes before its cursor (decision 0064): the
    /// lines it stopped at and after may be fixed, the ones before may not (they are imported,
    /// or reported in the error file, already). A job killed mid-run recorded none and takes its
    /// own file only.
    static func checkResumable(_ job: ImportRepository.Job, digest: String, source: ImportSource, path: String) throws -> Bool {
        let id = job.id.lowercasedString
        guard !job.dryRun else { throw BrokerError.invalidArgument("Job \(id) was a dry run; a dry run is never continued.") }
        guard job.status == "running" || job.status == "stopped" else {
            throw BrokerError.invalidArgument(
                "Job \(id) is \(job.status); only a running or stopped job continues. Run the file again for a new job.")
        }
        guard job.source == source.rawValue else {
            throw BrokerError.invalidArgument("Job \(id) imported a \(job.source) file: resume it with --from \(job.source).")
        }
        if job.fileDigest == digest { return false }
        guard let cursorDigest = job.cursorDigest else {
            throw BrokerError.invalidArgument(
                "Job \(id) imported another file: resume it with the same file and --from \(job.source) (a job that did not stop "
                    + "on its own, such as a killed one, continues only with the very file it read).")
        }
        guard (try? Self.digest(of: path, upTo: job.cursorOffset)) == cursorDigest else {
            throw BrokerError.invalidArgument(
                "Job \(id) has read lines 1 to \(max(1, job.cursorLine - 1)) of its file (its first \(job.cursorOffset) bytes), and "
                    + "they are not the same in this file. Only the lines from line \(job.cursorLine) on may change before a resume: "
                    + "undo the changes before that line, or import the changed file as a new job (without --resume).")
        }
        return true
    }

    /// The SHA-256 (hex) of the first `length` bytes of the file (all of them when it is
    /// shorter: then it differs from a longer prefix's).
    static func digest(of path: String, upTo length: Int64) throws -> String {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw BrokerError.invalidArgument("Cannot read \(path): check the path and its permissions.")
        }
        defer { try? handle.close() }
        var hash = SHA256()
        var left = length
        var read: Int64 = 0
        while left > 0, let chunk = try handle.read(upToCount: Int(min(left, 1 << 20))), !chunk.isEmpty {
            hash.update(data: chunk)
            left -= Int64(chunk.count)
            read += Int64(chunk.count)
        }
        // A file shorter than the cursor has not the bytes the job read: its length is hashed too.
        hash.update(data: Data("\u{0}\(read)".utf8))
        return Hex.encode(hash.finalize())
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

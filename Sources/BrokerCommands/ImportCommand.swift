import ArgumentParser
import Synchronization
import BrokerApplication
import BrokerCore
import Foundation
import Storage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `broker import users|list|show` (issue 24): existing social-login users into a tenant.
struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import existing social-login users (Firebase, Auth0, Supabase, JSON lines); list, show and roll back import jobs.",
        discussion: """
            Formats and examples: docs/import.md. Each batch commits with the job's place in the file: a killed \
            import continues with --resume JOB_ID, or by running the same file again while its job is unfinished.
            """,
        subcommands: [Users.self, List.self, Show.self, Rollback.self])

    /// A job as `--json` prints it.
    struct JobJSON: Encodable {
        let job_id: String
        let source: String
        let file: String?
        let dry_run: Bool
        let status: String
        let stop_reason: String?
        let line: Int64
        let records: Int
        let created: Int
        let updated: Int
        let unchanged: Int
        let conflicts: Int
        let skipped: Int
        let errors: Int
        let identities: Int
        let started_at: Date
        let finished_at: Date?

        init(_ job: ImportRepository.Job) {
            job_id = job.id.lowercasedString
            source = job.source
            file = job.fileName
            dry_run = job.dryRun
            status = job.status
            stop_reason = job.stopReason
            line = job.cursorLine
            records = job.counts.records
            created = job.counts.created
            updated = job.counts.updated
            unchanged = job.counts.unchanged
            conflicts = job.counts.conflicts
            skipped = job.counts.skipped
            errors = job.counts.errors
            identities = job.counts.identities
            started_at = job.startedAt
            finished_at = job.finishedAt
        }

        func encode(to encoder: any Encoder) throws {
            enum Keys: String, CodingKey {
                case job_id, source, file, dry_run, status, stop_reason, line, records, created, updated, unchanged, conflicts, skipped
                case errors, identities, started_at, finished_at
            }
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(job_id, forKey: .job_id)
            try container.encode(source, forKey: .source)
            try container.encode(file, forKey: .file)
            try container.encode(dry_run, forKey: .dry_run)
            try container.encode(status, forKey: .status)
            try container.encode(stop_reason, forKey: .stop_reason)
            try container.encode(line, forKey: .line)
            try container.encode(records, forKey: .records)
            try container.encode(created, forKey: .created)
            try container.encode(updated, forKey: .updated)
            try container.encode(unchanged, forKey: .unchanged)
            try container.encode(conflicts, forKey: .conflicts)
            try container.encode(skipped, forKey: .skipped)
            try container.encode(errors, forKey: .errors)
            try container.encode(identities, forKey: .identities)
            try container.encode(started_at, forKey: .started_at)
            try container.encode(finished_at, forKey: .finished_at)
        }
    }

    static func summary(_ job: ImportRepository.Job) -> String {
        let counts = job.counts
        return "\(counts.records) records: \(counts.created) created, \(counts.updated) updated, \(counts.unchanged) unchanged, "
            + "\(counts.conflicts) conflicts, \(counts.skipped) skipped, \(counts.errors) errors"
    }

    struct Users: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Import users from a file: one account per person under its external id, with its social identities.",
            discussion: """
                Exit status: 0 when the file was read to the end (conflicts, skips and errors are reported, in FILE.errors.jsonl), \
                1 when it stopped at --max-errors or where the file breaks (continue with --resume JOB_ID after fixing the file's lines \
                from the line it stopped at; the lines before it, already read, must stay as they are), and when SIGTERM or SIGINT \
                stopped it (the batch in flight commits first; continue with --resume JOB_ID).
                """)
        @Option(help: "The tenant slug.") var tenant: String
        @Option(help: "The file's format: firebase, auth0, supabase or jsonl.") var from: String
        @Option(help: "The file to import.") var file: String
        @Flag(help: "Read and check everything, report what would happen, write no account.") var dryRun = false
        @Option(help: "Continue this job (its settings stay unless given again).") var resume: String?
        @Option(help: "The team that issued the file's Apple user ids (default: the tenant's only team).") var appleTeam: String?
        @Option(
            parsing: .singleValue,
            help: "Map a source's provider name to one of the tenant's provider ids, e.g. oidc.line=line (repeatable).")
        var mapProvider: [String] = []
        @Option(help: "Stop at the bad record after this many (default 1000), before it; the job can then be resumed.") var maxErrors: Int?
        @Option(help: "Records per transaction (1 to 20000).") var batchSize = 2_000
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                guard let source = ImportSource(rawValue: from) else {
                    throw BrokerError.invalidArgument("--from must be firebase, auth0, supabase or jsonl, not '\(from.prefix(20))'.")
                }
                var importOptions = ImportService.Options(source: source, path: file)
                importOptions.dryRun = dryRun
                guard (1...20_000).contains(batchSize) else { throw BrokerError.invalidArgument("--batch-size must be from 1 to 20000.") }
                importOptions.batchSize = batchSize
                if let resume {
                    guard let id = UUID(uuidString: resume) else { throw BrokerError.invalidArgument("--resume takes a job id (a UUID).") }
                    importOptions.resumeJobID = id
                }
                importOptions.appleTeam = appleTeam
                if !mapProvider.isEmpty { importOptions.providerMap = try Users.providerMap(mapProvider) }
                if let maxErrors {
                    guard maxErrors >= 0 else { throw BrokerError.invalidArgument("--max-errors must be 0 or more.") }
                    importOptions.maxErrors = maxErrors
                }
                let context = try CLIContext()
                let secrets = SecretBox(masterKey: try context.masterKey())
                // SIGTERM or SIGINT: the batch in flight commits and the job stops, resumable
                // (issue 39 D11); the process exits within 30 s whatever the database does.
                let stop = GracefulStop()
                importOptions.stop = stop
                ShutdownDeadline.arm(seconds: 30, logger: context.logger) { stop.request() }
                let (slug, actor, logger, planned) = (tenant, context.actor, context.logger, importOptions)
                let display = ImportProgressDisplay(label: dryRun ? "checked" : "imported")
                let report = try await context.withDatabase { database in
                    let found = try await TenantAdmin(database: database, actor: actor).find(slug)
                    return try await ImportService(database: database, secrets: secrets, logger: logger).run(
                        tenant: found, options: planned, progress: { display.show($0) })
                }
                display.finish()
                let job = report.job
                if options.json {
                    try Output.json(JobJSON(job))
                } else {
                    let verb = job.dryRun ? "Dry run of" : (report.resumed ? "Continued" : "Imported")
                    print("\(verb) \(file) into '\(tenant)' (job \(job.id.lowercasedString)): \(ImportCommand.summary(job)).")
                    if job.counts.conflicts + job.counts.skipped + job.counts.errors > 0 {
                        print("Lines not imported, with their reasons: \(report.errorFile)")
                    }
                    if job.dryRun { print("Nothing was written: run again without --dry-run to import.") }
                }
                if let reason = report.stopReason {
                    let id = job.id.lowercasedString
                    let resume = "broker import users --tenant \(tenant) --from \(from) --file \(file) --resume \(id)"
                    if report.stoppedBySignal {
                        throw BrokerError(
                            code: "import_stopped", kind: .unavailable, title: "Import stopped",
                            detail: "Job \(id) \(reason); it continues from line \(job.cursorLine).",
                            hint: "Continue it with: \(resume)")
                    }
                    if report.stoppedOnFile {
                        throw BrokerError(
                            code: "import_file_invalid", kind: .invalidInput, title: "Import file broken",
                            detail: "Job \(id) \(reason). The records before it are imported (the job read to line \(job.cursorLine)).",
                            hint:
                                "Get the whole file (export it again), then: \(resume) (it continues when the part already read is unchanged)"
                        )
                    }
                    throw BrokerError(
                        code: "import_stopped", kind: .invalidInput, title: "Import stopped",
                        detail: "Job \(id) \(reason); it continues from line \(job.cursorLine).",
                        hint: "Fix that line and the bad lines after it, and keep the lines before it as they are (the bad ones "
                            + "among them, in \(report.errorFile), stay errors of this job), then: \(resume) [--max-errors N]")
                }
            }
        }

        /// `SOURCE=ID` pairs.
        static func providerMap(_ pairs: [String]) throws -> [String: String] {
            var map: [String: String] = [:]
            for pair in pairs {
                let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
                guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
                    throw BrokerError.invalidArgument("--map-provider takes SOURCE=ID (e.g. oidc.line=line), not '\(pair.prefix(40))'.")
                }
                map[parts[0]] = parts[1]
            }
            return map
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the tenant's import jobs, newest first.")
        @Option(help: "The tenant slug.") var tenant: String
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let context = try CLIContext()
                let (slug, actor) = (tenant, context.actor)
                let jobs = try await context.withDatabase { database in
                    let found = try await TenantAdmin(database: database, actor: actor).find(slug)
                    return try await database.imports.jobs(tenantID: found.id)
                }
                if options.json { return try Output.json(jobs.map(JobJSON.init)) }
                Output.table(
                    ["JOB", "SOURCE", "FILE", "STATUS", "RECORDS", "CREATED", "CONFLICTS", "ERRORS", "STARTED"],
                    jobs.map {
                        [
                            $0.id.lowercasedString, $0.source, $0.fileName ?? "-", $0.dryRun ? "\($0.status) (dry run)" : $0.status,
                            "\($0.counts.records)", "\($0.counts.created)", "\($0.counts.conflicts)", "\($0.counts.errors)",
                            Output.date($0.startedAt),
                        ]
                    })
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one import job.")
        @Argument(help: "The job id.") var jobID: String
        @Option(help: "The tenant slug (optional: a job id names one job).") var tenant: String?
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                guard let id = UUID(uuidString: jobID) else { throw BrokerError.invalidArgument("JOB_ID is a job id (a UUID).") }
                let context = try CLIContext()
                let (slug, actor) = (tenant, context.actor)
                let job = try await context.withDatabase { database -> ImportRepository.Job? in
                    var tenantID: UUID?
                    if let slug { tenantID = try await TenantAdmin(database: database, actor: actor).find(slug).id }
                    return try await database.imports.job(id: id, tenantID: tenantID)
                }
                guard let job else {
                    throw BrokerError(
                        code: "import_job_not_found", kind: .notFound, title: "Import job not found",
                        detail: "No import job \(id.lowercasedString).", hint: "List jobs with: broker import list --tenant T")
                }
                if options.json { return try Output.json(JobJSON(job)) }
                print(
                    """
                    job:        \(job.id.lowercasedString)
                    source:     \(job.source)\(job.dryRun ? " (dry run)" : "")
                    file:       \(Output.text(job.fileName ?? "-"))
                    status:     \(job.status)\(job.stopReason.map { ": \(Output.text($0))" } ?? "")
                    line:       \(job.cursorLine)
                    counts:     \(ImportCommand.summary(job)); \(job.counts.identities) identities written
                    started:    \(Output.date(job.startedAt))
                    finished:   \(Output.date(job.finishedAt))
                    """)
            }
        }
    }
}

extension ImportCommand {
    struct Rollback: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove the accounts and identities an import job created.",
            discussion: """
                Accounts that have signed in since the import stay, with their identities, and so do identities the job added \
                to existing accounts that were signed in with; --force removes them too. The job becomes rolled_back.
                """)
        @Argument(help: "The job id.") var jobID: String
        @Option(help: "The tenant slug (optional: a job id names one job).") var tenant: String?
        @Flag(help: "Say what would be removed and kept; change nothing.") var dryRun = false
        @Flag(help: "Remove accounts that have signed in since the import as well.") var force = false
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                guard let id = UUID(uuidString: jobID) else { throw BrokerError.invalidArgument("JOB_ID is a job id (a UUID).") }
                let context = try CLIContext()
                let (slug, actor, dryRun, force) = (tenant, context.actor, dryRun, force)
                let result = try await context.withDatabase { database -> (ImportRepository.Job, ImportRepository.Rollback) in
                    var tenantID: UUID?
                    if let slug { tenantID = try await TenantAdmin(database: database, actor: actor).find(slug).id }
                    guard let job = try await database.imports.job(id: id, tenantID: tenantID) else {
                        throw BrokerError(
                            code: "import_job_not_found", kind: .notFound, title: "Import job not found",
                            detail: "No import job \(id.lowercasedString).", hint: "List jobs with: broker import list --tenant T")
                    }
                    guard !job.dryRun else {
                        throw BrokerError.invalidArgument("Job \(id.lowercasedString) was a dry run: it created nothing.")
                    }
                    return (
                        job,
                        try await database.imports.rollback(
                            jobID: job.id, tenantID: job.tenantID, force: force, dryRun: dryRun, actor: actor)
                    )
                }
                let (job, rollback) = result
                if options.json {
                    struct Output_: Encodable {
                        let job_id: String
                        let dry_run: Bool
                        let accounts_removed: Int
                        let identities_removed: Int
                        let accounts_kept: Int
                        let identities_kept: Int
                    }
                    return try Output.json(
                        Output_(
                            job_id: job.id.lowercasedString, dry_run: dryRun, accounts_removed: rollback.accountsRemoved,
                            identities_removed: rollback.identitiesRemoved, accounts_kept: rollback.accountsKept,
                            identities_kept: rollback.identitiesKept))
                }
                let verb = dryRun ? "Would remove" : "Removed"
                print(
                    "\(verb) \(rollback.accountsRemoved) accounts and \(rollback.identitiesRemoved) identities of job \(job.id.lowercasedString)."
                )
                if rollback.accountsKept + rollback.identitiesKept > 0 {
                    print(
                        "Kept \(rollback.accountsKept) accounts and \(rollback.identitiesKept) identities: they have signed in since the import "
                            + "(their people would lose their accounts). Run again with --force to remove them too.")
                }
                if dryRun { print("Nothing was changed (--dry-run).") }
            }
        }
    }
}

/// Progress on standard error: a bar with records a second, percent and time left on a
/// terminal; a plain line every 10 seconds otherwise.
final class ImportProgressDisplay: Sendable {
    let label: String
    let isTerminal = isatty(STDERR_FILENO) == 1
    let started = ContinuousClock.now
    private let lastLine = Mutex<ContinuousClock.Instant?>(nil)

    init(label: String) { self.label = label }

    func show(_ progress: ImportService.Progress) {
        let elapsed = ContinuousClock.now - started
        let seconds = max(0.001, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        let rate = Double(progress.counts.records) / seconds
        let fraction = progress.fileBytes > 0 ? Double(progress.bytesRead) / Double(progress.fileBytes) : 1
        let left = fraction > 0 ? seconds * (1 - fraction) / fraction : 0
        let text = "\(progress.counts.records) records \(label), \(Int(rate))/s, \(Int(fraction * 100))%, \(Int(left)) s left"
        if isTerminal {
            let width = 30
            let filled = min(width, Int(fraction * Double(width)))
            let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
            FileHandle.standardError.write(Data("\r[\(bar)] \(text)  ".utf8))
            return
        }
        let due = lastLine.withLock { last -> Bool in
            guard last.map({ ContinuousClock.now - $0 >= .seconds(10) }) ?? true else { return false }
            last = ContinuousClock.now
            return true
        }
        if due { Output.stderr(text) }
    }

    func finish() {
        if isTerminal { FileHandle.standardError.write(Data("\n".utf8)) }
    }
}

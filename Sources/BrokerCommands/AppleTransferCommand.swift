import ArgumentParser
import BrokerApplication
import BrokerCore
import Foundation
import Storage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension AppleCommand {
    /// `broker apple transfer export|import` (issue 23 §4).
    struct Transfer: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Move the tenant's Apple identities to another team after an app transfer (Apple's 60-day window).",
            discussion: """
                1. Set the receiving team: broker apple team set --tenant T --team-id NEW --key-id K --private-key-file new.p8
                2. Before transferring the app, export: broker apple transfer export --tenant T --target-team NEW --out transfer.jsonl
                3. Transfer the app in App Store Connect, then move its group: broker apple group move --tenant T --group APPID --team-id NEW
                4. Import: broker apple transfer import --tenant T --in transfer.jsonl
                Between 3 and 4 a person's sign-in carries transfer_sub and links to their account. No account is created; \
                the file holds account ids and transfer_subs, never a user id of the old team or an email.
                """,
            subcommands: [Export.self, Import.self])

        /// `--max-calls-per-second`, default `BROKER_APPLE_MAX_CALLS_PER_SECOND`.
        static func rate(_ option: Int?, _ context: CLIContext) throws -> Int {
            let rate = option ?? context.configuration.appleCredentialChecks.maxCallsPerSecond
            guard (1...1_000).contains(rate) else { throw BrokerError.invalidArgument("--max-calls-per-second must be from 1 to 1000.") }
            return rate
        }

        /// Runs `body` with the tenant `slug` and the transfer of a connected database.
        static func withTransfer<T: Sendable>(
            _ context: CLIContext, tenant slug: String, _ body: @Sendable (AppleTeamTransfer, Tenant) async throws -> T
        ) async throws -> T {
            let (configuration, actor) = (context.configuration, context.actor)
            let secrets = SecretBox(masterKey: try context.masterKey())
            return try await context.withDatabase { database in
                let found = try await TenantAdmin(database: database, actor: actor).find(slug)
                let services = BrokerServices(
                    database: database, secrets: secrets, publicURL: configuration.publicURL, appleBaseURL: configuration.appleBaseURL,
                    endpoints: configuration.providerEndpoints)
                return try await body(services.appleTeamTransfer(actor: actor), found)
            }
        }

        struct Export: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Ask Apple for each Apple identity's transfer_sub for the target team; one JSON line per identity.")
            @Option(help: "The tenant slug.") var tenant: String
            @Option(help: "The team the app is transferred to.") var targetTeam: String
            @Option(help: "The file to write (created with mode 600).") var out: String
            @Option(help: "The sending team, when the tenant has several besides the target.") var sourceTeam: String?
            @Flag(help: "Continue a file an earlier export left: identities in it are skipped.") var resume = false
            @Option(help: "Calls a second to Apple (default BROKER_APPLE_MAX_CALLS_PER_SECOND).") var maxCallsPerSecond: Int?
            @OptionGroup var options: CommonOptions

            func run() async throws {
                try await runReporting(json: options.json) {
                    let context = try CLIContext()
                    let rate = try Transfer.rate(maxCallsPerSecond, context)
                    let file = try TransferFile(path: out, resume: resume, targetTeam: targetTeam)
                    let (target, source) = (targetTeam, sourceTeam)
                    let bar = ProgressBar(label: "exported")
                    let summary = try await Transfer.withTransfer(context, tenant: tenant) { transfer, found in
                        try await transfer.export(
                            tenant: found, targetTeam: target, sourceTeam: source, skip: file.identities, maxPerSecond: rate,
                            write: { try file.append($0) }, progress: { bar.show($0, of: $1) })
                    }
                    bar.finish()
                    struct Output_: Encodable {
                        let file: String
                        let total: Int
                        let exported: Int
                        let skipped: Int
                        let failed: [[String: String]]
                    }
                    let output = Output_(
                        file: out, total: summary.total, exported: summary.exported, skipped: summary.skipped,
                        failed: summary.failed.map { ["identity_id": $0.identityID, "error": $0.error] })
                    if options.json {
                        try Output.json(output)
                    } else {
                        print(
                            "Exported \(summary.exported) of \(summary.total) Apple identities of '\(tenant)' for team \(targetTeam) to \(out)"
                                + (summary.skipped > 0 ? " (\(summary.skipped) already in the file)." : "."))
                        for failure in summary.failed.prefix(20) { print("  failed \(failure.identityID): \(failure.error)") }
                    }
                    if !summary.failed.isEmpty {
                        throw BrokerError(
                            code: "transfer_incomplete", kind: .unavailable, title: "Export incomplete",
                            detail: "\(summary.failed.count) identities were not exported (Apple failed or refused).",
                            hint: "Run the same command with --resume to retry them.")
                    }
                }
            }
        }

        struct Import: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Exchange each transfer_sub of an export for the new team's user id and re-key the identity; idempotent.")
            @Option(help: "The tenant slug.") var tenant: String
            @Option(name: .customLong("in"), help: "The file broker apple transfer export wrote.") var input: String
            @Flag(help: "Check the file against the database; call nobody, change nothing.") var dryRun = false
            @Flag(help: "Start after the lines an earlier run of this file got through (FILE.progress).") var resume = false
            @Option(help: "Calls a second to Apple (default BROKER_APPLE_MAX_CALLS_PER_SECOND).") var maxCallsPerSecond: Int?
            @OptionGroup var options: CommonOptions

            func run() async throws {
                try await runReporting(json: options.json) {
                    let context = try CLIContext()
                    let rate = try Transfer.rate(maxCallsPerSecond, context)
                    let lines = try TransferFile.read(input)
                    let progressPath = input + ".progress"
                    let start = resume ? TransferFile.progress(at: progressPath) : 0
                    let remaining = Array(lines.dropFirst(min(start, lines.count)))
                    let dryRun = dryRun
                    let bar = ProgressBar(label: dryRun ? "checked" : "imported")
                    let summary = try await Transfer.withTransfer(context, tenant: tenant) { transfer, found in
                        try await transfer.importLines(
                            tenant: found, lines: remaining, dryRun: dryRun, maxPerSecond: rate,
                            progress: { done, total in
                                bar.show(done, of: total)
                                if !dryRun, done % 100 == 0 || done == total { TransferFile.saveProgress(start + done, at: progressPath) }
                            })
                    }
                    bar.finish()
                    struct Output_: Encodable {
                        let dry_run: Bool
                        let lines: Int
                        let skipped_by_resume: Int
                        let rekeyed: Int
                        let already: Int
                        let not_found: [String]
                        let conflicts: [[String: String]]
                        let failed: [[String: String]]
                    }
                    let output = Output_(
                        dry_run: dryRun, lines: lines.count, skipped_by_resume: lines.count - remaining.count,
                        rekeyed: summary.rekeyed, already: summary.already, not_found: summary.notFound,
                        conflicts: summary.conflicts.map { ["identity_id": $0.identityID, "error": $0.error] },
                        failed: summary.failed.map { ["identity_id": $0.identityID, "error": $0.error] })
                    if options.json {
                        try Output.json(output)
                    } else {
                        print(
                            "\(dryRun ? "Dry run: would re-key" : "Re-keyed") \(summary.rekeyed) identities of '\(tenant)' from \(input); "
                                + "\(summary.already) already on the new team, \(summary.notFound.count) not found, "
                                + "\(summary.conflicts.count) conflicts, \(summary.failed.count) failed"
                                + (start > 0 ? " (\(lines.count - remaining.count) lines skipped by --resume)." : "."))
                        for id in summary.notFound.prefix(20) {
                            print("  not found \(id): no identity of its account waits with that transfer_sub")
                        }
                        for failure in (summary.conflicts + summary.failed).prefix(20) {
                            print("  \(failure.identityID): \(failure.error)")
                        }
                    }
                    if !summary.failed.isEmpty {
                        throw BrokerError(
                            code: "transfer_incomplete", kind: .unavailable, title: "Import incomplete",
                            detail: "\(summary.failed.count) identities were not re-keyed (Apple failed or refused).",
                            hint: "Run the same command again (it is idempotent) to retry them.")
                    }
                }
            }
        }
    }
}

/// An export file: JSON lines of ``AppleTeamTransfer/Line``.
final class TransferFile: Sendable {
    let handle: FileHandle
    /// The identities a resumed file holds already.
    let identities: Set<String>

    init(path: String, resume: Bool, targetTeam: String) throws {
        let manager = FileManager.default
        if manager.fileExists(atPath: path) {
            guard resume else {
                throw BrokerError.invalidArgument(
                    "\(path) exists.", hint: "Continue it with --resume, or give another --out.")
            }
            let lines = try Self.read(path)
            if let other = lines.first(where: { $0.target_team != targetTeam }) {
                throw BrokerError.invalidArgument(
                    "\(path) was exported for team \(other.target_team.prefix(10)), not \(targetTeam.prefix(10)).")
            }
            identities = Set(lines.map(\.identity_id))
        } else {
            guard manager.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
                throw BrokerError.invalidArgument("Cannot create \(path).", hint: "Give a path in a folder you can write to.")
            }
            identities = []
        }
        guard let handle = FileHandle(forWritingAtPath: path) else {
            throw BrokerError.invalidArgument("Cannot write \(path).", hint: "Give a path you can write to.")
        }
        handle.seekToEndOfFile()
        self.handle = handle
    }

    func append(_ line: AppleTeamTransfer.Line) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var data = try encoder.encode(line)
        data.append(UInt8(ascii: "\n"))
        try handle.write(contentsOf: data)
    }

    static func read(_ path: String) throws -> [AppleTeamTransfer.Line] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw BrokerError.invalidArgument("Cannot read \(path).", hint: "Give the file broker apple transfer export wrote.")
        }
        let decoder = JSONDecoder()
        var lines: [AppleTeamTransfer.Line] = []
        for (number, text) in data.split(separator: UInt8(ascii: "\n")).enumerated() where !text.allSatisfy({ $0 == 32 || $0 == 13 }) {
            guard let line = try? decoder.decode(AppleTeamTransfer.Line.self, from: Data(text)) else {
                throw BrokerError.invalidArgument(
                    "Line \(number + 1) of \(path) is not a line of a transfer export.",
                    hint: "Give the file broker apple transfer export wrote, unchanged.")
            }
            lines.append(line)
        }
        return lines
    }

    static func progress(at path: String) -> Int {
        FileManager.default.contents(atPath: path).flatMap {
            Int(String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        } ?? 0
    }

    static func saveProgress(_ done: Int, at path: String) {
        _ = FileManager.default.createFile(atPath: path, contents: Data("\(done)\n".utf8), attributes: [.posixPermissions: 0o600])
    }
}

/// A progress bar on standard error, drawn only when it is a terminal.
final class ProgressBar: Sendable {
    let label: String
    let isTerminal = isatty(STDERR_FILENO) == 1

    init(label: String) { self.label = label }

    func show(_ done: Int, of total: Int) {
        guard isTerminal, total > 0 else { return }
        let width = 30
        let filled = min(width, done * width / total)
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        FileHandle.standardError.write(Data("\r[\(bar)] \(done)/\(total) \(label)".utf8))
    }

    func finish() {
        if isTerminal { FileHandle.standardError.write(Data("\n".utf8)) }
    }
}

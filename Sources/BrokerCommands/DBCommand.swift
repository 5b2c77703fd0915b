import ArgumentParser
import BrokerServer
import Foundation
import Storage

struct DBCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "db",
        abstract: "Apply and inspect database migrations.",
        subcommands: [Migrate.self, Status.self]
    )

    struct Migrate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Apply pending migrations (safe to run from several places at once).")
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let context = try CLIContext()
                let applied = try await context.withDatabase(migrate: .never) { database in
                    try await database.migrator().migrate()
                }
                if options.json {
                    try Output.json(["applied": applied.map { "\(String(format: "%04d", $0.version))_\($0.name)" }])
                } else if applied.isEmpty {
                    print("Database is up to date.")
                } else {
                    for migration in applied { print("applied \(String(format: "%04d", migration.version))_\(migration.name)") }
                }
            }
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List applied and pending migrations; exit 1 if an applied file was edited.")
        @OptionGroup var options: CommonOptions

        struct Row: Encodable {
            let version: Int
            let name: String
            let state: String
            let appliedAt: Date?
            enum CodingKeys: String, CodingKey {
                case version, name, state
                case appliedAt = "applied_at"
            }
        }

        func run() async throws {
            try await runReporting(json: options.json) {
                let context = try CLIContext()
                let status = try await context.withDatabase(migrate: .never) { database in
                    try await database.migrator().status()
                }
                let modified = Set(status.modified.map(\.version))
                let unknown = Set(status.unknown.map(\.version))
                var rows = status.applied.map { applied in
                    Row(
                        version: applied.version, name: applied.name,
                        state: modified.contains(applied.version)
                            ? "modified" : unknown.contains(applied.version) ? "unknown" : "applied",
                        appliedAt: applied.appliedAt)
                }
                rows += status.pending.map { Row(version: $0.version, name: $0.name, state: "pending", appliedAt: nil) }
                if options.json {
                    try Output.json(rows)
                } else {
                    Output.table(
                        ["VERSION", "NAME", "STATE", "APPLIED"],
                        rows.map { [String(format: "%04d", $0.version), $0.name, $0.state, Output.date($0.appliedAt)] })
                }
                if !status.modified.isEmpty {
                    Output.stderr(
                        "error: an applied migration file was edited; restore it and put the change in a new migration.")
                    throw ExitCode.failure
                }
            }
        }
    }
}

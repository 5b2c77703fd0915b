import ArgumentParser
import BrokerApplication
import BrokerCore
import Foundation
import Storage

/// `broker export users` (issue 24): a tenant's accounts and identities in the `jsonl` import format.
struct ExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export a tenant's users in the import format (no tokens, no secrets).",
        subcommands: [Users.self])

    struct Users: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Every account with its external id (its account id when it has none) and its identities, one JSON line each.",
            discussion: "broker import users --from jsonl reads the file back; docs/import.md describes the format.")
        @Option(help: "The tenant slug.") var tenant: String
        @Option(help: "The file to write (created with mode 600).") var out: String
        @Option(help: "The format: jsonl (the only one).") var format = "jsonl"
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                guard format == "jsonl" else { throw BrokerError.invalidArgument("--format must be jsonl.") }
                let context = try CLIContext()
                let (slug, actor, path) = (tenant, context.actor, out)
                let count = try await context.withDatabase { database in
                    let found = try await TenantAdmin(database: database, actor: actor).find(slug)
                    return try await UserExport(database: database).run(tenant: found, path: path)
                }
                if options.json {
                    struct Output_: Encodable {
                        let file: String
                        let accounts: Int
                    }
                    try Output.json(Output_(file: out, accounts: count))
                } else {
                    print("Exported \(count) accounts of '\(tenant)' to \(out).")
                }
            }
        }
    }
}

import ArgumentParser
import BrokerApplication
import BrokerCore
import BrokerServer
import Foundation
import Storage

struct KeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "Rotate, list and retire a tenant's session-token signing keys (ES256).",
        discussion: """
            A rotation publishes the new key in the tenant's JWKS as 'next' and makes it active after a \
            delay (default: the tenant's setting, 600 s), so resource servers cache it before it signs. \
            A tenant with no active key gets one at once.
            """,
        subcommands: [Rotate.self, List.self, Retire.self]
    )

    struct KeyJSON: Encodable {
        let kid: String
        let algorithm: String
        let state: String
        let createdAt: Date
        let activatesAt: Date
        let retiredAt: Date?
        enum CodingKeys: String, CodingKey {
            case kid, algorithm, state
            case createdAt = "created_at"
            case activatesAt = "activates_at"
            case retiredAt = "retired_at"
        }

        init(_ status: SigningKeyStatus) {
            kid = status.record.kid
            algorithm = status.record.algorithm
            state = status.state.rawValue
            createdAt = status.record.createdAt
            activatesAt = status.record.activatesAt
            retiredAt = status.retiredSince
        }
    }

    static func admin(_ context: CLIContext, _ database: Database) throws -> SigningKeyAdmin {
        SigningKeyAdmin(database: database, secrets: SecretBox(masterKey: try context.masterKey()), actor: context.actor)
    }

    static func printTable(_ keys: [SigningKeyStatus]) {
        Output.table(
            ["KID", "STATE", "ACTIVATES", "RETIRED"],
            keys.map { [$0.record.kid, $0.state.rawValue, Output.date($0.record.activatesAt), Output.date($0.retiredSince)] })
    }

    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a new signing key.")
        @Option(help: "The tenant slug.") var tenant: String
        @Option(help: "Seconds before the new key starts signing (default: the tenant's key activation delay).")
        var delay: Int?
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let context = try CLIContext()
                let secrets = SecretBox(masterKey: try context.masterKey())
                let status = try await context.withDatabase { database in
                    try await SigningKeyAdmin(database: database, secrets: secrets, actor: context.actor).rotate(
                        tenant: tenant, delay: delay)
                }
                if options.json { try Output.json(KeyJSON(status)) } else if status.state == .active {
                    print("Key \(status.record.kid) is active for tenant '\(tenant)'.")
                } else {
                    print(
                        "Key \(status.record.kid) is published as next for tenant '\(tenant)' and signs from \(Output.date(status.record.activatesAt)).")
                }
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List signing keys with their state.")
        @Option(help: "The tenant slug.") var tenant: String
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let context = try CLIContext()
                let keys = try await context.withDatabase { database in
                    try await KeysCommand.admin(context, database).list(tenant: tenant)
                }
                if options.json { try Output.json(keys.map(KeyJSON.init)) } else { KeysCommand.printTable(keys) }
            }
        }
    }

    struct Retire: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Retire a key. Retiring the active key promotes the 'next' key at once (refused if there is none).")
        @Option(help: "The tenant slug.") var tenant: String
        @Argument(help: "The key id (kid). A kid is base64url and may start with '-': put '--' before it (broker keys retire --tenant T -- <kid>).") var kid: String
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let context = try CLIContext()
                let keys = try await context.withDatabase { database in
                    try await KeysCommand.admin(context, database).retire(tenant: tenant, kid: kid)
                }
                if options.json { try Output.json(keys.map(KeyJSON.init)) } else {
                    print("Key \(kid) of tenant '\(tenant)' is retired.")
                    KeysCommand.printTable(keys)
                }
            }
        }
    }
}

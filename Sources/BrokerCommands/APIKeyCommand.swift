import ArgumentParser
import BrokerApplication
import BrokerCore
import BrokerServer
import Foundation
import Storage

struct APIKeyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "api-key",
        abstract: "Create, list and revoke a tenant's API keys.",
        discussion: "Keys are shown once at creation; the broker stores only their SHA-256 and a short prefix.",
        subcommands: [Create.self, List.self, Revoke.self]
    )

    struct KeyJSON: Encodable {
        let id: String
        let name: String
        let prefix: String
        let scopes: [String]
        let createdAt: Date
        /// When the key last authenticated a request, to the minute (decision 0048); null: never.
        let lastUsedAt: Date?
        let revokedAt: Date?
        enum CodingKeys: String, CodingKey {
            case id, name, prefix, scopes
            case createdAt = "created_at"
            case lastUsedAt = "last_used_at"
            case revokedAt = "revoked_at"
        }

        init(_ record: APIKeyRecord) {
            id = record.id.lowercasedString
            name = record.name
            prefix = record.prefix
            scopes = record.scopes.map(\.rawValue)
            createdAt = record.createdAt
            lastUsedAt = record.lastUsedAt
            revokedAt = record.revokedAt
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(id, forKey: .id)
            try container.encode(name, forKey: .name)
            try container.encode(prefix, forKey: .prefix)
            try container.encode(scopes, forKey: .scopes)
            try container.encode(createdAt, forKey: .createdAt)
            // Always present: null when never used / not revoked.
            try container.encode(lastUsedAt, forKey: .lastUsedAt)
            try container.encode(revokedAt, forKey: .revokedAt)
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create an API key and print it once.",
            discussion: "Plain output is the key alone on stdout; --json prints {\"key\": ..., \"id\": ...}.")
        @Option(help: "The tenant slug.") var tenant: String
        @Option(help: "A name to tell keys apart (default: 'default').") var name: String?
        @Option(
            parsing: .upToNextOption,
            help: "Scopes (\(APIKeyScope.allCases.map(\.rawValue).joined(separator: ", ")); default: all).")
        var scopes: [String] = []
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let context = try CLIContext()
                let (record, key) = try await context.withDatabase { database in
                    try await APIKeyAdmin(database: database, actor: context.actor).create(
                        tenant: tenant, name: name, scopes: scopes)
                }
                if options.json {
                    struct Created: Encodable {
                        let key: String
                        let id: String
                        let prefix: String
                        let name: String
                        let scopes: [String]
                    }
                    try Output.json(
                        Created(
                            key: key, id: record.id.lowercasedString, prefix: record.prefix, name: record.name,
                            scopes: record.scopes.map(\.rawValue)))
                } else {
                    print(key)
                    Output.stderr(
                        "API key \(record.id.lowercasedString) created for tenant '\(tenant)'. Store it now: it is not shown again.")
                }
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List a tenant's API keys (never the keys themselves).")
        @Option(help: "The tenant slug.") var tenant: String
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let context = try CLIContext()
                let keys = try await context.withDatabase { database in
                    try await APIKeyAdmin(database: database, actor: context.actor).list(tenant: tenant)
                }
                if options.json {
                    try Output.json(keys.map(KeyJSON.init))
                } else if keys.isEmpty {
                    print("Tenant '\(tenant)' has no API keys. Create one with: broker api-key create --tenant \(tenant)")
                } else {
                    Output.table(
                        ["ID", "PREFIX", "NAME", "SCOPES", "CREATED", "LAST USED", "REVOKED"],
                        keys.map {
                            [
                                $0.id.lowercasedString, $0.prefix, $0.name, $0.scopes.map(\.rawValue).joined(separator: ","),
                                Output.date($0.createdAt), Output.date($0.lastUsedAt), Output.date($0.revokedAt),
                            ]
                        })
                }
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke an API key; it stops working at once.")
        @Option(help: "The tenant slug.") var tenant: String
        @Argument(help: "The key id (from 'broker api-key list').") var id: String
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let context = try CLIContext()
                let record = try await context.withDatabase { database in
                    try await APIKeyAdmin(database: database, actor: context.actor).revoke(tenant: tenant, id: id)
                }
                if options.json {
                    try Output.json(KeyJSON(record))
                } else {
                    print("API key \(record.id.lowercasedString) (\(record.prefix)…) of tenant '\(tenant)' is revoked.")
                }
            }
        }
    }
}

import ArgumentParser
import BrokerApplication
import BrokerCore
import BrokerServer
import Foundation
import Storage

struct KeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "Rotate, list, retire and revoke a tenant's session-token signing keys (ES256).",
        discussion: """
            A rotation publishes the new key in the tenant's JWKS as 'next' and makes it active after a \
            delay (default: the tenant's setting, 600 s), so resource servers cache it before it signs. \
            A tenant with no active key gets one at once.
            """,
        subcommands: [Rotate.self, List.self, Retire.self, Revoke.self]
    )

    struct KeyJSON: Encodable {
        let kid: String
        let algorithm: String
        let state: String
        let createdAt: Date
        let activatesAt: Date
        let retiredAt: Date?
        let revokedAt: Date?
        enum CodingKeys: String, CodingKey {
            case kid, algorithm, state
            case createdAt = "created_at"
            case activatesAt = "activates_at"
            case retiredAt = "retired_at"
            case revokedAt = "revoked_at"
        }

        func encode(to encoder: any Encoder) throws {
            // Every member always present: null when a key was never retired or revoked.
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(kid, forKey: .kid)
            try container.encode(algorithm, forKey: .algorithm)
            try container.encode(state, forKey: .state)
            try container.encode(createdAt, forKey: .createdAt)
            try container.encode(activatesAt, forKey: .activatesAt)
            try container.encode(retiredAt, forKey: .retiredAt)
            try container.encode(revokedAt, forKey: .revokedAt)
        }

        init(_ status: SigningKeyStatus) {
            kid = status.record.kid
            algorithm = status.record.algorithm
            state = status.state.rawValue
            createdAt = status.record.createdAt
            activatesAt = status.record.activatesAt
            retiredAt = status.retiredSince
            revokedAt = status.record.revokedAt
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
                if options.json {
                    try Output.json(KeyJSON(status))
                } else if status.state == .active {
                    print("Key \(status.record.kid) is active for tenant '\(tenant)'.")
                } else {
                    print(
                        "Key \(status.record.kid) is published as next for tenant '\(tenant)' and signs from \(Output.date(status.record.activatesAt))."
                    )
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
        @Argument(
            help:
                "The key id (kid). A kid is base64url and may start with '-': put '--' before it (broker keys retire --tenant T -- <kid>).")
        var kid: String
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let context = try CLIContext()
                let keys = try await context.withDatabase { database in
                    try await KeysCommand.admin(context, database).retire(tenant: tenant, kid: kid)
                }
                if options.json {
                    try Output.json(keys.map(KeyJSON.init))
                } else {
                    print("Key \(kid) of tenant '\(tenant)' is retired.")
                    KeysCommand.printTable(keys)
                }
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke a compromised key: it leaves the JWKS at once and the tokens it signed stop verifying.",
            discussion: """
                Every instance drops the key within a second (the change is announced through PostgreSQL). \
                Access tokens it signed introspect inactive; sessions stay, and their next refresh gets \
                tokens from another key. Revoking the active key promotes the 'next' key at once, or creates \
                a new key active at once when none is pending. A revocation cannot be undone.
                """)
        @Option(help: "The tenant slug.") var tenant: String
        @Argument(
            help:
                "The key id (kid). A kid is base64url and may start with '-': put '--' before it (broker keys revoke --tenant T -- <kid>).")
        var kid: String
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let context = try CLIContext()
                let revocation = try await context.withDatabase { database in
                    try await KeysCommand.admin(context, database).revoke(tenant: tenant, kid: kid)
                }
                if options.json {
                    try Output.json(revocation.keys.map(KeyJSON.init))
                } else {
                    if revocation.alreadyRevoked {
                        print("Key \(kid) of tenant '\(tenant)' was already revoked; nothing changed.")
                    } else {
                        print("Key \(kid) of tenant '\(tenant)' is revoked: it is out of the JWKS and tokens it signed no longer verify.")
                    }
                    if let successor = revocation.successor {
                        print("Key \(successor.record.kid) signs from now on.")
                    }
                    KeysCommand.printTable(revocation.keys)
                }
            }
        }
    }
}

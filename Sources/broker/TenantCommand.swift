import ArgumentParser
import BrokerCore
import BrokerServer
import Foundation
import Storage

struct TenantCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tenant",
        abstract: "Create, list, show, disable and enable tenants.",
        subcommands: [Create.self, List.self, Show.self, Disable.self, Enable.self]
    )

    /// The JSON shape of a tenant in CLI output.
    struct TenantJSON: Encodable {
        let id: UUID
        let slug: String
        let name: String
        let status: String
        let issuer: String
        let accessTokenTTL: Int
        let refreshTokenAbsoluteTTL: Int
        let refreshTokenIdleTTL: Int
        let audiences: [String]
        let autoLinkVerifiedEmail: Bool
        let keyActivationDelay: Int
        let createdAt: Date

        enum CodingKeys: String, CodingKey {
            case id, slug, name, status, issuer, audiences
            case accessTokenTTL = "access_token_ttl"
            case refreshTokenAbsoluteTTL = "refresh_token_absolute_ttl"
            case refreshTokenIdleTTL = "refresh_token_idle_ttl"
            case autoLinkVerifiedEmail = "auto_link_verified_email"
            case keyActivationDelay = "key_activation_delay"
            case createdAt = "created_at"
        }

        init(_ tenant: Tenant, publicURL: String) {
            id = tenant.id
            slug = tenant.slug.rawValue
            name = tenant.displayName
            status = tenant.status.rawValue
            issuer = "\(publicURL)/t/\(tenant.slug)"
            accessTokenTTL = tenant.session.accessTokenTTL
            refreshTokenAbsoluteTTL = tenant.session.refreshTokenAbsoluteTTL
            refreshTokenIdleTTL = tenant.session.refreshTokenIdleTTL
            audiences = tenant.effectiveAudiences
            autoLinkVerifiedEmail = tenant.linking.autoLinkVerifiedEmail
            keyActivationDelay = tenant.keyActivationDelay
            createdAt = tenant.createdAt
        }

        func printText() {
            print("""
                slug:        \(slug)
                name:        \(name)
                status:      \(status)
                id:          \(id.lowercasedString)
                issuer:      \(issuer)
                audiences:   \(audiences.joined(separator: ", "))
                access TTL:  \(accessTokenTTL)s, refresh TTL: \(refreshTokenAbsoluteTTL)s absolute / \(refreshTokenIdleTTL)s idle
                auto-link by verified email: \(autoLinkVerifiedEmail ? "on" : "off")
                key activation delay: \(keyActivationDelay)s
                created:     \(Output.date(createdAt))
                """)
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a tenant (with an active signing key).",
            discussion: "Slugs are 3-40 lowercase letters, digits and dashes, e.g. 'acme-prod'.")

        @Argument(help: "The tenant slug.") var slug: String
        @Option(help: "Display name (default: the slug).") var name: String?
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let context = try CLIContext()
                let secrets = SecretBox(masterKey: try context.masterKey())
                _ = try TenantSlug(slug)  // refuse a bad slug before touching the database
                let tenant = try await context.withDatabase { database in
                    try await TenantAdmin(database: database, actor: context.actor).create(
                        slug: slug, name: name, secrets: secrets)
                }
                let output = TenantJSON(tenant, publicURL: context.configuration.publicURL)
                if options.json { try Output.json(output) } else {
                    print("Created tenant '\(tenant.slug)' with an active signing key.")
                    output.printText()
                    print("Next: broker api-key create --tenant \(tenant.slug)")
                }
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List tenants.")
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let context = try CLIContext()
                let tenants = try await context.withDatabase { database in try await database.tenants.list() }
                if options.json {
                    try Output.json(tenants.map { TenantJSON($0, publicURL: context.configuration.publicURL) })
                } else if tenants.isEmpty {
                    print("No tenants yet. Create one with: broker tenant create <slug>")
                } else {
                    Output.table(
                        ["SLUG", "NAME", "STATUS", "CREATED"],
                        tenants.map { [$0.slug.rawValue, $0.displayName, $0.status.rawValue, Output.date($0.createdAt)] })
                }
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a tenant and its settings.")
        @Argument(help: "The tenant slug.") var slug: String
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let context = try CLIContext()
                let tenant = try await context.withDatabase { database in
                    try await TenantAdmin(database: database, actor: context.actor)
                        .find(slug)
                }
                let output = TenantJSON(tenant, publicURL: context.configuration.publicURL)
                if options.json { try Output.json(output) } else { output.printText() }
            }
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Disable a tenant: its API keys stop working (403) until it is enabled again.")
        @Argument(help: "The tenant slug.") var slug: String
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await TenantCommand.setStatus(slug, .disabled, options: options)
        }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Enable a disabled tenant again.")
        @Argument(help: "The tenant slug.") var slug: String
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await TenantCommand.setStatus(slug, .active, options: options)
        }
    }

    static func setStatus(_ slug: String, _ status: TenantStatus, options: CommonOptions) async throws {
        try await runReporting(json: options.json) {
            let context = try CLIContext()
            let tenant = try await context.withDatabase { database in
                try await TenantAdmin(database: database, actor: context.actor)
                    .setStatus(slug, status)
            }
            let output = TenantJSON(tenant, publicURL: context.configuration.publicURL)
            if options.json { try Output.json(output) } else { print("Tenant '\(slug)' is \(status.rawValue).") }
        }
    }
}

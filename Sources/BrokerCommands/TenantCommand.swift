import ArgumentParser
import BrokerApplication
import BrokerCore
import BrokerServer
import Foundation
import Storage

struct TenantCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tenant",
        abstract: "Create, list, show, change, disable and enable tenants.",
        subcommands: [Create.self, List.self, Show.self, Set.self, Disable.self, Enable.self]
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
        let policyMode: String
        let policyExemption: LoginPolicyExemption?
        /// The tenant's own API-key rate and burst; null: the instance's default.
        let rateLimit: Int?
        let rateBurst: Int?
        let maxSessionsPerAccount: Int
        let createdAt: Date

        enum CodingKeys: String, CodingKey {
            case id, slug, name, status, issuer, audiences
            case accessTokenTTL = "access_token_ttl"
            case refreshTokenAbsoluteTTL = "refresh_token_absolute_ttl"
            case refreshTokenIdleTTL = "refresh_token_idle_ttl"
            case autoLinkVerifiedEmail = "auto_link_verified_email"
            case keyActivationDelay = "key_activation_delay"
            case policyMode = "policy_mode"
            case policyExemption = "policy_exemption"
            case rateLimit = "rate_limit"
            case rateBurst = "rate_burst"
            case maxSessionsPerAccount = "max_sessions_per_account"
            case createdAt = "created_at"
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(id, forKey: .id)
            try container.encode(slug, forKey: .slug)
            try container.encode(name, forKey: .name)
            try container.encode(status, forKey: .status)
            try container.encode(issuer, forKey: .issuer)
            try container.encode(accessTokenTTL, forKey: .accessTokenTTL)
            try container.encode(refreshTokenAbsoluteTTL, forKey: .refreshTokenAbsoluteTTL)
            try container.encode(refreshTokenIdleTTL, forKey: .refreshTokenIdleTTL)
            try container.encode(audiences, forKey: .audiences)
            try container.encode(autoLinkVerifiedEmail, forKey: .autoLinkVerifiedEmail)
            try container.encode(keyActivationDelay, forKey: .keyActivationDelay)
            try container.encode(policyMode, forKey: .policyMode)
            // Always present: null when the tenant is not exempt.
            try container.encode(policyExemption, forKey: .policyExemption)
            // Always present: null when the tenant keeps the instance's default.
            try container.encode(rateLimit, forKey: .rateLimit)
            try container.encode(rateBurst, forKey: .rateBurst)
            try container.encode(maxSessionsPerAccount, forKey: .maxSessionsPerAccount)
            try container.encode(createdAt, forKey: .createdAt)
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
            policyMode = tenant.policy.mode.rawValue
            policyExemption = tenant.policy.exemption
            rateLimit = tenant.rateLimit?.perSecond
            rateBurst = tenant.rateLimit?.burst
            maxSessionsPerAccount = tenant.session.maxSessionsPerAccount
            createdAt = tenant.createdAt
        }

        func printText() {
            print(
                """
                slug:        \(slug)
                name:        \(Output.text(name))
                status:      \(status)
                id:          \(id.lowercasedString)
                issuer:      \(issuer)
                audiences:   \(audiences.joined(separator: ", "))
                access TTL:  \(accessTokenTTL)s, refresh TTL: \(refreshTokenAbsoluteTTL)s absolute / \(refreshTokenIdleTTL)s idle
                open sessions per account: at most \(maxSessionsPerAccount) (a sign-in past it revokes the oldest)
                auto-link by verified email: \(autoLinkVerifiedEmail ? "on" : "off")
                key activation delay: \(keyActivationDelay)s
                guideline 4.8 policy: \(policyMode)\(policyExemption.map { " (exempt: \($0.reason.rawValue))" } ?? "")
                API-key rate limit: \(rateLimit.map { "\($0)/s, burst \(rateBurst ?? $0 * 2), per key and instance" } ?? "the instance's default (BROKER_API_KEY_RATE_LIMIT)")
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
                if options.json {
                    try Output.json(output)
                } else {
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

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Change a tenant's settings.",
            discussion: """
                --auto-link-verified-email on: the first sign-in of an unknown identity whose email its provider \
                verified (not an Apple private-relay address, not Facebook's) joins the one active account with \
                that verified email instead of creating a new account. Off by default.

                --rate-limit N [--burst M]: each of the tenant's API keys may send N requests a second, M at once \
                (default 2N), to each instance: with K instances a key gets up to K times as much. Over it, \
                429 rate_limited with Retry-After. --rate-limit default returns to the instance's \
                BROKER_API_KEY_RATE_LIMIT / BROKER_API_KEY_RATE_BURST (200/s, burst 400).

                --max-sessions-per-account N: an account may have N open sessions (default 100, 1 to 10000); \
                a sign-in that would open one more revokes the oldest (reason session_limit: its refresh token \
                gets invalid_grant, and its access tokens introspect inactive).
                """)
        @Option(help: "The tenant slug.") var tenant: String
        @Option(help: "on or off.") var autoLinkVerifiedEmail: String?
        @Option(help: "Requests a second per API key and instance, or 'default'.") var rateLimit: String?
        @Option(help: "Requests at once per API key and instance (default: twice the rate).") var burst: Int?
        @Option(help: "Open sessions an account may have (1 to 10000; default 100).") var maxSessionsPerAccount: Int?
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                guard autoLinkVerifiedEmail != nil || rateLimit != nil || maxSessionsPerAccount != nil else {
                    throw BrokerError.invalidArgument(
                        "Nothing to change.",
                        hint:
                            "For example: broker tenant set --tenant \(tenant) --auto-link-verified-email on, or --rate-limit 500 --burst 1000"
                    )
                }
                let autoLink: Bool? = try autoLinkVerifiedEmail.map { value in
                    guard let on = ["on": true, "off": false][value.lowercased()] else {
                        throw BrokerError.invalidArgument("--auto-link-verified-email takes on or off, not '\(value.prefix(20))'.")
                    }
                    return on
                }
                let limit = try Self.rateLimit(rateLimit, burst: burst)
                if let cap = maxSessionsPerAccount, !SessionSettings.allowedMaxSessions.contains(cap) {
                    throw BrokerError.invalidArgument("--max-sessions-per-account takes a whole number from 1 to 10000, not \(cap).")
                }
                let cap = maxSessionsPerAccount
                let context = try CLIContext()
                let changed = try await context.withDatabase { database in
                    let admin = TenantAdmin(database: database, actor: context.actor)
                    var changed: Tenant?
                    if let autoLink { changed = try await admin.setAutoLinkVerifiedEmail(tenant, autoLink) }
                    if let limit { changed = try await admin.setRateLimit(tenant, limit.value) }
                    if let cap { changed = try await admin.setMaxSessionsPerAccount(tenant, cap) }
                    guard let changed else { throw BrokerError.tenantNotFound(tenant) }
                    return changed
                }
                let output = TenantJSON(changed, publicURL: context.configuration.publicURL)
                if options.json { try Output.json(output) } else { output.printText() }
            }
        }

        /// The rate `--rate-limit` asks for: its own, or the instance's default.
        struct RateLimitChange {
            let value: RateLimit?
        }

        /// `--rate-limit N [--burst M]` as a change; nil: no change.
        static func rateLimit(_ text: String?, burst: Int?) throws -> RateLimitChange? {
            guard let text else {
                if burst != nil {
                    throw BrokerError.invalidArgument("--burst goes with --rate-limit.", hint: "For example: --rate-limit 500 --burst 1000")
                }
                return nil
            }
            if text.lowercased() == "default" {
                if burst != nil { throw BrokerError.invalidArgument("--rate-limit default takes no --burst.") }
                return RateLimitChange(value: nil)
            }
            guard let rate = Int(text), RateLimit.allowedRates.contains(rate) else {
                throw BrokerError.invalidArgument(
                    "--rate-limit takes a whole number of requests a second from 1 to 1000000, or 'default', not '\(text.prefix(20))'.")
            }
            return RateLimitChange(value: RateLimit(perSecond: rate, burst: burst ?? min(rate * 2, RateLimit.allowedBursts.upperBound)))
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

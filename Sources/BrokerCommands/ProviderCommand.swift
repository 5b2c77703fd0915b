import ArgumentParser
import BrokerApplication
import BrokerCore
import BrokerServer
import Foundation
import Providers

struct ProviderCommand: AsyncParsableCommand {
    // Computed: the ids and types come from the installed types (decision 0079).
    static var configuration: CommandConfiguration {
        CommandConfiguration(
            commandName: "provider",
            abstract:
                "Enable, disable and inspect a tenant's sign-in providers (\(InstalledProviderTypes.descriptors.map(\.displayName).joined(separator: ", "))).",
            discussion: """
                A provider is an id (\(InstalledProviderTypes.reservedIDs(apple: false)), or the operator's slug such as line) \
                of a type (\(InstalledProviderTypes.configurableTypeNames)). Apple is configured with 'broker apple'; 'disable apple' and \
                'enable apple' turn it off and on, keeping its team, groups and clients. Re-running 'enable' \
                replaces the provider's settings. --platforms records where the provider is offered (ios, \
                android, web, macos); sign-ins are not refused by platform. 'attest' records that a provider \
                meets the three criteria of App Store Review Guideline 4.8 ('broker policy').
                """,
            subcommands: [Enable.self, Disable.self, List.self, Show.self, Attest.self]
        )
    }

    static func provider(_ name: String) throws -> ProviderID {
        guard let provider = ProviderID(rawValue: name) else {
            throw BrokerError.invalidArgument(
                "'\(name.prefix(40))' is not a provider id.",
                hint:
                    "Use \(InstalledProviderTypes.reservedIDs()) or the tenant's own id, as it is written: 2-32 lowercase letters, digits and dashes starting with a letter (see 'broker provider list --tenant <slug>')."
            )
        }
        return provider
    }

    static func platforms(_ text: String?) throws -> [ProviderPlatform] {
        guard let text else { return [] }
        guard let platforms = ProviderPlatform.parseList(text) else {
            throw BrokerError.invalidArgument(
                "--platforms '\(text.prefix(80))' is not a list of ios, android, web and macos.",
                hint: "For example: --platforms ios,android,web")
        }
        return platforms
    }

    static func print(_ status: ProviderAdmin.Status) {
        Swift.print("\(status.provider) (\(status.type)): \(status.enabled ? "enabled" : "not enabled")")
        if let name = status.displayName { Swift.print("  display name:  \(Output.text(name))") }
        // OpenID Connect: its settings in this order; a type the broker does not ship: every
        // setting its descriptor describes beyond the lines below, by name; Google and Facebook:
        // the lines below say it all.
        let common: Set<String> = ["client_ids", "display_name", "hosted_domain", "app_id", "limited_login"]
        let settingNames =
            status.type == "oidc"
            ? ["issuer", "jwks_url", "jwks_uri", "algorithms", "email_trust", "allowed_tids", "nonce_required"]
            : ProviderRegistry.builtInDescriptors.contains { $0.type.rawValue == status.type }
                ? [] : status.settings.keys.filter { !common.contains($0) }.sorted()
        do {
            for name in settingNames {
                guard let value = status.settings[name], value != .null else { continue }
                let text: String =
                    switch value {
                    case .string(let text): text
                    case .array(let items): items.compactMap(\.string).joined(separator: ",")
                    case .bool(let flag): flag ? "yes" : "no"
                    default: "-"
                    }
                Swift.print(
                    "  \((name.replacingOccurrences(of: "_", with: " ") + ":").padding(toLength: 15, withPad: " ", startingAt: 0))\(Output.text(text.isEmpty ? "-" : text))"
                )
            }
        }
        if !status.platforms.isEmpty { Swift.print("  platforms:     \(status.platforms.joined(separator: ","))") }
        if !status.clientIDs.isEmpty { Swift.print("  client ids:    \(Output.text(status.clientIDs.joined(separator: ", ")))") }
        if let domain = status.hostedDomain { Swift.print("  hosted domain: \(Output.text(domain))") }
        if let appID = status.appID { Swift.print("  app id:        \(appID)") }
        if status.hasAppSecret { Swift.print("  app secret:    set (encrypted; never shown)") }
        if let limited = status.limitedLogin { Swift.print("  limited login: \(limited ? "on" : "off")") }
        if let attested = status.attested { Swift.print("  attested:      \(attested ? "yes (guideline 4.8 criteria)" : "no")") }
    }

    /// Says on stderr that a change withdrew the provider's guideline 4.8 attestation, and how
    /// to give it again.
    static func noteWithdrawal(_ withdrawal: AttestationWithdrawal?, tenant: String) {
        guard let withdrawal else { return }
        let name = withdrawal.provider.rawValue
        let why: String
        switch withdrawal.reason {
        case .providerDisabled: why = "\(name) was disabled"
        case .configurationChanged:
            let changed = withdrawal.changed.map { $0.replacingOccurrences(of: "_", with: " ") }.joined(separator: " and ")
            why = "its \(changed) changed"
        }
        Output.stderr(
            "note: the guideline 4.8 attestation of \(name) (given by \(Output.text(withdrawal.attestation.attestedBy)) on "
                + "\(Output.date(withdrawal.attestation.attestedAt))) was withdrawn: \(why); it covered the provider as it was configured. "
                + "If \(name) as configured now meets the three criteria: broker provider attest --tenant \(tenant) --provider \(name) "
                + "--limits-data-to-name-email --private-email --no-ad-tracking")
    }

    struct Enable: AsyncParsableCommand {
        // Computed: the settings come from the installed types' descriptors (decision 0079).
        static var configuration: CommandConfiguration {
            CommandConfiguration(
                abstract: "Enable a provider for a tenant (or replace its settings), or turn Apple back on.",
                usage:
                    "broker provider enable <provider> --tenant <slug> [--type <type>] [<setting> ...] [--platforms <list>] [--force] [--json]",
                discussion: """
                    Each provider type takes its own settings, given after the provider id as --name VALUE \
                    (or --name=VALUE), a secret as the file holding it:

                    \(ProviderSettingArguments.help(InstalledProviderTypes.descriptors))
                    apple: no settings (turns Sign in with Apple back on after 'disable apple')

                    An OpenID Connect provider (LINE, Yahoo! JAPAN ID, Microsoft Entra ID, any conforming \
                    issuer): without --jwks-url, 'enable' reads {issuer}/.well-known/openid-configuration, \
                    whose issuer must equal --issuer exactly, and keeps its jwks_uri and algorithms; {tid} in \
                    --issuer makes a multi-tenant issuer (Microsoft). URLs are https:// (http:// on loopback \
                    only). Its emails never join accounts unless --email-trust verified. docs/providers.md has \
                    worked examples.

                    The web flow (Google, OIDC): --client-secret-file turns on the authorization code flow \
                    with PKCE for the first --client-id (POST /v1/sign-in/{id}/web/start); the provider sends \
                    the person to --redirect-uri (default {BROKER_PUBLIC_URL}/oidc/callback, register it at \
                    the provider) and the broker on to one of the --return-url pages.

                    Without --platforms the provider counts as offered on every platform, iOS and macOS \
                    included: App Store Review Guideline 4.8 then needs a qualifying login option on both \
                    (Sign in with Apple, or under privacy-equivalent an attested provider), unless the \
                    tenant is exempt. A change that breaks the rule is refused with nothing changed \
                    ('broker policy check' shows the standing); --force applies it anyway and records the \
                    violation in the audit log.
                    """)
        }
        @Option(help: "The tenant slug.") var tenant: String
        @Option(
            help:
                "The provider type of a new id: \(InstalledProviderTypes.configurable.filter { ProviderID(rawValue: $0.type.rawValue)?.reservedType == nil }.map(\.type.rawValue).joined(separator: ", "))."
        )
        var type: String?
        @Option(help: "Where the provider is offered: a comma-separated list of ios, android, web, macos (default: everywhere).")
        var platforms: String?
        @Flag(help: "Apply it even if it breaks App Store Review Guideline 4.8 (recorded in the audit log).") var force = false
        @OptionGroup var options: CommonOptions
        @Argument(
            parsing: .allUnrecognized,
            help: ArgumentHelp(
                "The provider id (\(InstalledProviderTypes.reservedIDs()), or the tenant's own, a slug such as line), then its type's settings.",
                valueName: "provider> <setting"))
        var words: [String] = []

        /// The provider id and its settings, read against every installed type's flags.
        func settings() throws -> ProviderSettingArguments {
            try ProviderSettingArguments.read(words, flags: InstalledProviderTypes.descriptors.flatMap(\.settingFlags))
        }

        func validate() throws {
            do {
                _ = try settings()
            } catch let error as BrokerError {
                throw ValidationError(error.hint.map { "\(error.detail) \($0)" } ?? error.detail)
            }
        }

        func run() async throws {
            try await runReporting(json: options.json) {
                let settings = try settings()
                let name = try ProviderCommand.provider(settings.provider)
                let platforms = try ProviderCommand.platforms(platforms)
                let flags = InstalledProviderTypes.descriptors.flatMap(\.settingFlags)
                let values = try settings.readingSecretFiles(flags)
                let context = try CLIContext()
                // Only a type that keeps a secret needs the master key.
                let keepsSecret = flags.contains { $0.isSecret && values[$0.name] != nil }
                let secrets = try SecretBox(masterKey: keepsSecret ? context.masterKey() : MasterKey.generate().key)
                let registry = InstalledProviderTypes.registry(
                    secrets: secrets, endpoints: context.configuration.providerEndpoints, logger: context.logger)
                let status = try await context.withDatabase { database in
                    let status = try await ProviderAdmin(database: database, actor: context.actor).enable(
                        tenant: tenant, provider: name.rawValue, type: type, platforms: platforms, values: values, registry: registry,
                        force: force)
                    if force, !options.json { try await PolicyCommand.warnViolations(tenant: tenant, database: database) }
                    return status
                }
                if options.json {
                    try Output.json(status)
                } else {
                    Swift.print("\(status.provider) is enabled for tenant '\(tenant)'.")
                    ProviderCommand.print(status)
                    ProviderCommand.noteWithdrawal(status.attestationWithdrawn, tenant: tenant)
                }
            }
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Turn a provider off for a tenant (Apple included); its settings and identities are kept.",
            discussion: """
                Its sign-ins then answer 400 provider_not_enabled; accounts stay readable and their other \
                identities still sign in. 'enable' turns it back on (Apple: 'broker provider enable apple'). \
                Refused, with nothing changed, when an attested provider is the qualifying login option \
                App Store Review Guideline 4.8 relies on; --force disables it anyway and records the \
                violation in the audit log.
                """)
        @Argument(help: "The provider id: \(InstalledProviderTypes.reservedIDs()) or the tenant's own.") var provider: String
        @Option(help: "The tenant slug.") var tenant: String
        @Flag(help: "Disable it even if it breaks App Store Review Guideline 4.8 (recorded in the audit log).") var force = false
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let name = try ProviderCommand.provider(provider)
                let context = try CLIContext()
                let withdrawn = try await context.withDatabase { database in
                    let withdrawn = try await ProviderAdmin(database: database, actor: context.actor).disable(
                        tenant: tenant, provider: name, force: force)
                    if force, !options.json { try await PolicyCommand.warnViolations(tenant: tenant, database: database) }
                    return withdrawn
                }
                struct Disabled: Encodable {
                    let provider: String
                    let enabled: Bool
                }
                if options.json {
                    try Output.json(Disabled(provider: name.rawValue, enabled: false))
                } else {
                    Swift.print("\(name.rawValue) is disabled for tenant '\(tenant)'; its settings and identities are kept.")
                    ProviderCommand.noteWithdrawal(withdrawn, tenant: tenant)
                }
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the tenant's providers and whether each is enabled.")
        @Option(help: "The tenant slug.") var tenant: String
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let context = try CLIContext()
                let statuses = try await context.withDatabase { database in
                    try await ProviderAdmin(database: database, actor: context.actor).list(
                        tenant: tenant, registry: InstalledProviderTypes.registry(secrets: SecretBox(masterKey: MasterKey.generate().key)))
                }
                if options.json {
                    try Output.json(statuses)
                } else {
                    Output.table(
                        ["PROVIDER", "TYPE", "ENABLED", "PLATFORMS", "CLIENTS"],
                        statuses.map { status in
                            [
                                status.provider, status.type, status.enabled ? "yes" : "no",
                                status.platforms.isEmpty ? "-" : status.platforms.joined(separator: ","),
                                status.appID ?? (status.clientIDs.isEmpty ? "-" : status.clientIDs.joined(separator: ",")),
                            ]
                        })
                }
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one provider's settings for a tenant (never its secret).")
        @Argument(help: "The provider id: \(InstalledProviderTypes.reservedIDs()) or the tenant's own.") var provider: String
        @Option(help: "The tenant slug.") var tenant: String
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let name = try ProviderCommand.provider(provider)
                let context = try CLIContext()
                let status = try await context.withDatabase { database in
                    try await ProviderAdmin(database: database, actor: context.actor).show(
                        tenant: tenant, provider: name,
                        registry: InstalledProviderTypes.registry(secrets: SecretBox(masterKey: MasterKey.generate().key)))
                }
                if options.json { try Output.json(status) } else { ProviderCommand.print(status) }
            }
        }
    }

    struct Attest: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Attest that a provider (Google, Facebook, an OpenID Connect id) meets App Store Review Guideline 4.8's three criteria (or --revoke).",
            discussion: """
                Under the privacy-equivalent mode an attested provider counts as the equivalent login \
                option of guideline 4.8, as Sign in with Apple does built in (Apple takes no attestation). \
                State all three criteria, as the tenant's apps use the provider: it limits data collection \
                to name and email (--limits-data-to-name-email), lets people keep their email private \
                (--private-email), and collects no interactions for advertising without consent \
                (--no-ad-tracking). An attestation may be given before or after the provider is enabled; \
                it is recorded with who gave it and when, and in the audit log.

                It covers the provider as the tenant configured it: disabling the provider, or enabling \
                it again with other client ids or hosted domain (Google), another app id or Limited Login \
                turned on or off (Facebook), withdraws it in the same change (audited as \
                provider.attestation_withdrawn), and that change is judged without it. Changing only \
                --platforms, or Facebook's app secret, keeps it.

                --revoke withdraws it. Refused, with nothing changed, when the attestation is what keeps a \
                platform compliant; --force withdraws it anyway and records the violation in the audit log.
                """)
        @Option(help: "The tenant slug.") var tenant: String
        @Option(help: "The provider id: \(InstalledProviderTypes.reservedIDs(apple: false)) or the tenant's own.") var provider: String
        @Flag(help: "The provider limits data collection to the user's name and email address.") var limitsDataToNameEmail = false
        @Flag(help: "The provider lets users keep their email address private from everyone.") var privateEmail = false
        @Flag(help: "The provider does not collect interactions with the app for advertising without consent.") var noAdTracking = false
        @Flag(help: "Withdraw the attestation instead.") var revoke = false
        @Flag(help: "With --revoke: withdraw it even if it breaks the guideline (recorded in the audit log).") var force = false
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let name = try ProviderCommand.provider(provider)
                if revoke, limitsDataToNameEmail || privateEmail || noAdTracking {
                    throw BrokerError.invalidArgument(
                        "--revoke takes none of the criteria flags.",
                        hint: "broker provider attest --tenant \(tenant) --provider \(name.rawValue) --revoke")
                }
                if force, !revoke {
                    throw BrokerError.invalidArgument(
                        "--force goes with --revoke only: an attestation never breaks the guideline.",
                        hint: "Drop --force.")
                }
                let context = try CLIContext()
                struct Attested: Encodable {
                    let tenant: String
                    let provider: String
                    let attested: Bool
                    let attested_at: Date?
                    let attested_by: String?

                    enum CodingKeys: String, CodingKey { case tenant, provider, attested, attested_at, attested_by }

                    func encode(to encoder: any Encoder) throws {
                        var container = encoder.container(keyedBy: CodingKeys.self)
                        try container.encode(tenant, forKey: .tenant)
                        try container.encode(provider, forKey: .provider)
                        try container.encode(attested, forKey: .attested)
                        try container.encode(attested_at, forKey: .attested_at)
                        try container.encode(attested_by, forKey: .attested_by)
                    }
                }
                if revoke {
                    try await context.withDatabase { database in
                        try await PolicyAdmin(database: database, actor: context.actor).revokeAttestation(
                            tenant: tenant, provider: name, force: force)
                        if force, !options.json { try await PolicyCommand.warnViolations(tenant: tenant, database: database) }
                    }
                    if options.json {
                        try Output.json(
                            Attested(tenant: tenant, provider: name.rawValue, attested: false, attested_at: nil, attested_by: nil))
                    } else {
                        Swift.print("The attestation of \(name.rawValue) for tenant '\(tenant)' is withdrawn.")
                    }
                    return
                }
                let attestation = try await context.withDatabase { database in
                    try await PolicyAdmin(database: database, actor: context.actor).attest(
                        tenant: tenant, provider: name, limitsDataToNameEmail: limitsDataToNameEmail, privateEmail: privateEmail,
                        noAdTracking: noAdTracking)
                }
                if options.json {
                    try Output.json(
                        Attested(
                            tenant: tenant, provider: name.rawValue, attested: true, attested_at: attestation.attestedAt,
                            attested_by: attestation.attestedBy))
                } else {
                    Swift.print(
                        "\(name.rawValue) is attested for tenant '\(tenant)' as meeting App Store Review Guideline 4.8's three criteria "
                            + "(by \(Output.text(attestation.attestedBy)), \(Output.date(attestation.attestedAt))). It qualifies under the privacy-equivalent mode."
                    )
                }
            }
        }
    }
}

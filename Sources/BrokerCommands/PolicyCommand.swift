import ArgumentParser
import BrokerApplication
import BrokerCore
import BrokerServer
import Foundation
import Storage

struct PolicyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "policy",
        abstract: "App Store Review Guideline 4.8 per tenant: mode, exemption, compliance check.",
        discussion: """
            The rule, per tenant and per Apple platform (ios, macos): when a social login provider that \
            does not qualify is offered there, a qualifying one must be offered there too, unless the \
            tenant is exempt. Mode privacy-equivalent (the default; the text since January 2024): Sign \
            in with Apple qualifies, and Google or Facebook once attested with 'broker provider attest'. \
            Mode apple-required (the 2020 text): only Sign in with Apple qualifies. Google or Facebook \
            enabled without --platforms count as offered on every platform.

            Changes that break the rule ('broker provider enable|disable', 'broker apple client \
            remove', 'broker provider attest --revoke', 'broker policy set', 'broker policy exempt \
            --clear') are refused with nothing changed, unless given --force, which records the \
            violation in the audit log (policy.violation_forced).
            """,
        subcommands: [SetMode.self, Exempt.self, Check.self]
    )

    /// After a `--force` change: says on stderr which of the tenant's platforms now violate.
    static func warnViolations(tenant: String, database: Database) async throws {
        let reports = try await PolicyAdmin(database: database, actor: "cli").check(tenant: tenant)
        for report in reports where report.status == "violation" {
            Output.stderr(
                "warning: tenant '\(tenant)' violates App Store Review Guideline 4.8 on \(report.platform.rawValue) "
                    + "(\(report.nonQualifyingProviders.map(\.rawValue).joined(separator: ", ")) without a qualifying option); "
                    + "applied with --force and recorded in the audit log. Fix: broker policy check --tenant \(tenant)")
        }
    }

    /// A tenant's policy settings, as `set` and `exempt` print them.
    struct SettingsJSON: Encodable {
        let tenant: String
        let mode: LoginPolicyMode
        let exemption: LoginPolicyExemption?

        init(_ tenant: Tenant) {
            self.tenant = tenant.slug.rawValue
            mode = tenant.policy.mode
            exemption = tenant.policy.exemption
        }

        enum CodingKeys: String, CodingKey { case tenant, mode, exemption }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(tenant, forKey: .tenant)
            try container.encode(mode, forKey: .mode)
            try container.encode(exemption, forKey: .exemption)
        }
    }

    struct SetMode: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set",
            abstract: "Set which text of guideline 4.8 the tenant is held to.",
            discussion: """
                privacy-equivalent (every tenant's default): an equivalent option that limits data to name \
                and email, keeps email private and collects no interactions for advertising without \
                consent; Sign in with Apple or an attested provider. apple-required: Sign in with Apple \
                itself. Refused, with nothing changed, when the switch breaks the rule (e.g. only an \
                attested Google covers iOS); --force applies it anyway and records the violation.
                """)
        @Option(help: "The tenant slug.") var tenant: String
        @Option(help: "privacy-equivalent or apple-required.") var mode: String
        @Flag(help: "Apply it even if it breaks App Store Review Guideline 4.8 (recorded in the audit log).") var force = false
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                guard let mode = LoginPolicyMode(rawValue: mode.lowercased()) else {
                    throw BrokerError.invalidArgument(
                        "--mode '\(mode.prefix(40))' is not privacy-equivalent or apple-required.",
                        hint: "broker policy set --tenant \(tenant) --mode privacy-equivalent")
                }
                let context = try CLIContext()
                let updated = try await context.withDatabase { database in
                    let updated = try await PolicyAdmin(database: database, actor: context.actor).setMode(
                        tenant: tenant, mode, force: force)
                    if force, !options.json { try await PolicyCommand.warnViolations(tenant: tenant, database: database) }
                    return updated
                }
                if options.json {
                    try Output.json(SettingsJSON(updated))
                } else {
                    print("Tenant '\(tenant)' is held to guideline 4.8 in mode \(updated.policy.mode.rawValue).")
                }
            }
        }
    }

    struct Exempt: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Record the tenant's exemption from guideline 4.8, or clear it.",
            discussion: """
                Reasons (the guideline's five): own-accounts-only (the app uses only the company's own \
                accounts), alternative-marketplace (an alternative app marketplace, or an app distributed \
                from one, with its own login), education-enterprise (education, enterprise or business \
                apps that require existing accounts), government-id (a government or industry-backed \
                citizen ID or electronic ID), third-party-client (a client for a specific third-party \
                service, signed in to that service's account). --note says why, for an App Store reviewer.

                --clear is refused, with nothing changed, when a platform relies on the exemption; \
                --force clears it anyway and records the violation in the audit log.
                """)
        @Option(help: "The tenant slug.") var tenant: String
        @Option(help: "own-accounts-only, alternative-marketplace, education-enterprise, government-id or third-party-client.")
        var reason: String?
        @Option(help: "Why the exemption applies (up to 1000 characters).") var note: String?
        @Flag(help: "Clear the exemption instead.") var clear = false
        @Flag(help: "With --clear: clear it even if it breaks the guideline (recorded in the audit log).") var force = false
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let reasons = LoginPolicyExemptionReason.allCases.map(\.rawValue).joined(separator: ", ")
                let context = try CLIContext()
                if clear {
                    guard reason == nil, note == nil else {
                        throw BrokerError.invalidArgument(
                            "--clear takes no --reason or --note.", hint: "broker policy exempt --tenant \(tenant) --clear")
                    }
                    let updated = try await context.withDatabase { database in
                        let updated = try await PolicyAdmin(database: database, actor: context.actor).clearExemption(
                            tenant: tenant, force: force)
                        if force, !options.json { try await PolicyCommand.warnViolations(tenant: tenant, database: database) }
                        return updated
                    }
                    if options.json {
                        try Output.json(SettingsJSON(updated))
                    } else {
                        print("Tenant '\(tenant)' is no longer exempt from guideline 4.8.")
                    }
                    return
                }
                guard !force else {
                    throw BrokerError.invalidArgument(
                        "--force goes with --clear only: an exemption never breaks the guideline.", hint: "Drop --force.")
                }
                guard let reason else {
                    throw BrokerError.invalidArgument(
                        "Give --reason and --note, or --clear.",
                        hint:
                            "broker policy exempt --tenant \(tenant) --reason <\(reasons.replacingOccurrences(of: ", ", with: "|"))> --note \"...\""
                    )
                }
                guard let parsed = LoginPolicyExemptionReason(rawValue: reason.lowercased()) else {
                    throw BrokerError.invalidArgument(
                        "--reason '\(reason.prefix(40))' is not one of the guideline's exemptions.", hint: "Use one of: \(reasons).")
                }
                let updated = try await context.withDatabase { database in
                    try await PolicyAdmin(database: database, actor: context.actor).exempt(
                        tenant: tenant, reason: parsed, note: note ?? "")
                }
                if options.json {
                    try Output.json(SettingsJSON(updated))
                } else {
                    print(
                        "Tenant '\(tenant)' is exempt from guideline 4.8 (\(parsed.rawValue)): \(Output.text(updated.policy.exemption?.note ?? ""))"
                    )
                }
            }
        }
    }

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Report every tenant's (or one tenant's) guideline 4.8 standing on iOS and macOS.",
            discussion: """
                Each tenant and Apple platform is compliant, exempt (with the recorded reason and note) or \
                in violation (with the providers that do not qualify and what would fix it). Android and \
                the web are not governed by the guideline. Exit status 1 when any is in violation, 0 \
                otherwise. --json: one object per tenant and platform.
                """)
        @Option(help: "Only this tenant.") var tenant: String?
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let context = try CLIContext()
                let reports = try await context.withDatabase { database in
                    try await PolicyAdmin(database: database, actor: context.actor).check(tenant: tenant)
                }
                let violations = reports.filter { $0.status == "violation" }
                if options.json {
                    try Output.json(reports)
                } else {
                    Check.printText(reports)
                }
                guard violations.isEmpty else {
                    if !options.json {
                        Output.stderr(
                            "error: \(violations.count) of \(reports.count) tenant platforms violate App Store Review Guideline 4.8.")
                        Output.stderr("hint: Apply a fix listed above for each; 'broker policy check --json' for scripts.")
                    }
                    throw ExitCode.failure
                }
            }
        }

        static func printText(_ reports: [PolicyAdmin.PlatformReport]) {
            guard !reports.isEmpty else {
                print("No tenants.")
                return
            }
            func names(_ providers: [ProviderID]) -> String {
                providers.isEmpty ? "-" : providers.map(\.rawValue).joined(separator: ",")
            }
            Output.table(
                ["TENANT", "PLATFORM", "STATUS", "MODE", "QUALIFYING", "NOT QUALIFYING"],
                reports.map {
                    [
                        $0.tenant, $0.platform.rawValue, $0.status, $0.mode.rawValue, names($0.qualifyingProviders),
                        names($0.nonQualifyingProviders),
                    ]
                })
            for report in reports {
                if let exemption = report.exemption {
                    print(
                        "\(report.tenant) \(report.platform.rawValue): exempt (\(exemption.reason.rawValue), since \(Output.date(exemption.since))): \(Output.text(exemption.note))"
                    )
                }
                if let fix = report.fix {
                    print(
                        "\(report.tenant) \(report.platform.rawValue): \(names(report.nonQualifyingProviders)) offered without a qualifying option. Fix: \(fix)"
                    )
                }
            }
        }
    }
}

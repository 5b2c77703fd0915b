import BrokerCore
import Foundation
import Storage

/// Operator actions on a tenant's App Store guideline 4.8 policy (`broker policy ...`,
/// `broker provider attest`), and the guard every change that could break the rule goes
/// through (decision 0026).
public struct PolicyAdmin: Sendable {
    package let database: Database
    package let actor: String

    public init(database: Database, actor: String) {
        self.database = database
        self.actor = actor
    }

    /// Sets the tenant's mode. Refused when it adds violations (switching to `apple-required`
    /// while only attested providers cover a platform), unless `force`.
    public func setMode(tenant slug: String, _ mode: LoginPolicyMode, force: Bool) async throws -> Tenant {
        let tenant = try await TenantAdmin.find(slug, in: database)
        return try await database.loginPolicy.setMode(
            tenantID: tenant.id, mode, actor: actor,
            guard: Self.guard(tenant: slug, action: "policy.mode.set", command: "broker policy set --mode \(mode.rawValue)", force: force))
    }

    /// Records an exemption with the operator's note (what a reviewer should know).
    public func exempt(tenant slug: String, reason: LoginPolicyExemptionReason, note: String) async throws -> Tenant {
        let tenant = try await TenantAdmin.find(slug, in: database)
        let note = note.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !note.isEmpty, FreeText.fits(note, characters: 1_000) else {
            throw BrokerError.invalidArgument(
                note.isEmpty ? "An exemption needs a --note saying why it applies." : "--note is longer than 1000 characters.",
                hint:
                    "For example: broker policy exempt --tenant \(slug) --reason \(reason.rawValue) --note \"Staff app; sign-in with existing company accounts only\""
            )
        }
        try FreeText.require(
            note, option: "--note",
            hint: "Write the note as plain text on one line, without escape sequences (it is printed by 'broker policy check').")
        return try await database.loginPolicy.setExemption(tenantID: tenant.id, reason: reason, note: note, actor: actor)
    }

    /// Clears the exemption. Refused when something depends on it, unless `force`.
    public func clearExemption(tenant slug: String, force: Bool) async throws -> Tenant {
        let tenant = try await TenantAdmin.find(slug, in: database)
        guard
            let cleared = try await database.loginPolicy.clearExemption(
                tenantID: tenant.id, actor: actor,
                guard: Self.guard(tenant: slug, action: "policy.exemption.clear", command: "broker policy exempt --clear", force: force))
        else {
            throw BrokerError(
                code: "policy_not_exempt", kind: .notFound, title: "No exemption",
                detail: "Tenant '\(slug)' has no guideline 4.8 exemption to clear.",
                hint: "See its standing: broker policy check --tenant \(slug)")
        }
        return cleared
    }

    /// Records that the provider, as the tenant configured it, meets the three criteria of the
    /// current text. All three must be stated.
    public func attest(
        tenant slug: String, provider: ProviderID, limitsDataToNameEmail: Bool, privateEmail: Bool, noAdTracking: Bool
    ) async throws -> ProviderAttestation {
        try Self.attestable(provider, tenant: slug)
        let missing = [
            ("--limits-data-to-name-email", limitsDataToNameEmail), ("--private-email", privateEmail), ("--no-ad-tracking", noAdTracking),
        ].filter { !$0.1 }.map(\.0)
        guard missing.isEmpty else {
            throw BrokerError.invalidArgument(
                "An attestation states all three criteria of App Store Review Guideline 4.8; missing: \(missing.joined(separator: ", ")).",
                hint:
                    "If \(provider.rawValue), as this tenant's apps use it, limits data collection to name and email, lets people keep their email private and collects no interactions for advertising without consent: \(Self.attestCommand(slug, provider))"
            )
        }
        let tenant = try await TenantAdmin.find(slug, in: database)
        return try await database.loginPolicy.attest(tenantID: tenant.id, provider: provider, actor: actor)
    }

    /// Withdraws an attestation. Refused when something depends on it, unless `force`.
    public func revokeAttestation(tenant slug: String, provider: ProviderID, force: Bool) async throws {
        try Self.attestable(provider, tenant: slug)
        let tenant = try await TenantAdmin.find(slug, in: database)
        let revoked = try await database.loginPolicy.revoke(
            tenantID: tenant.id, provider: provider, actor: actor,
            guard: Self.guard(
                tenant: slug, action: "provider.attestation.revoke",
                command: "broker provider attest --provider \(provider.rawValue) --revoke",
                force: force))
        guard revoked else {
            throw BrokerError(
                code: "attestation_not_found", kind: .notFound, title: "No attestation",
                detail: "Tenant '\(slug)' has no attestation for \(provider.rawValue).",
                hint: "See 'broker provider show \(provider.rawValue) --tenant \(slug)'.")
        }
    }

    /// The tenant's attestations.
    public func attestations(tenant slug: String) async throws -> [ProviderAttestation] {
        let tenant = try await TenantAdmin.find(slug, in: database)
        return try await database.loginPolicy.attestations(tenantID: tenant.id)
    }

    /// Every tenant's (or one tenant's) standing per Apple platform, tenants by slug, `ios` first.
    public func check(tenant slug: String?) async throws -> [PlatformReport] {
        let tenants: [Tenant]
        if let slug { tenants = [try await TenantAdmin.find(slug, in: database)] } else { tenants = try await database.tenants.list() }
        var reports: [PlatformReport] = []
        for tenant in tenants {
            let policy = try await database.loginPolicy.loginPolicy(for: tenant)
            reports += Self.report(tenant: tenant.slug.rawValue, policy: policy)
        }
        return reports
    }

    /// One tenant and Apple platform, as `broker policy check` reports it. Every member is
    /// present; those that do not apply are null.
    public struct PlatformReport: Sendable, Encodable {
        public let tenant: String
        public let platform: ProviderPlatform
        /// `compliant`, `exempt` or `violation`.
        public let status: String
        public let mode: LoginPolicyMode
        /// Offered on the platform and not qualifying under the mode.
        public let nonQualifyingProviders: [ProviderID]
        /// Offered on the platform and qualifying under the mode.
        public let qualifyingProviders: [ProviderID]
        /// The exemption, when the platform stands only by it.
        public let exemption: LoginPolicyExemption?
        /// What would make a violation compliant.
        public let fix: String?

        package enum CodingKeys: String, CodingKey {
            case tenant, platform, status, mode, exemption, fix
            case nonQualifyingProviders = "non_qualifying_providers"
            case qualifyingProviders = "qualifying_providers"
        }

        package enum ExemptionKeys: String, CodingKey { case reason, note, since }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(tenant, forKey: .tenant)
            try container.encode(platform, forKey: .platform)
            try container.encode(status, forKey: .status)
            try container.encode(mode, forKey: .mode)
            try container.encode(nonQualifyingProviders, forKey: .nonQualifyingProviders)
            try container.encode(qualifyingProviders, forKey: .qualifyingProviders)
            if let exemption {
                var nested = container.nestedContainer(keyedBy: ExemptionKeys.self, forKey: .exemption)
                try nested.encode(exemption.reason, forKey: .reason)
                try nested.encode(exemption.note, forKey: .note)
                try nested.encode(exemption.since, forKey: .since)
            } else {
                try container.encodeNil(forKey: .exemption)
            }
            try container.encode(fix, forKey: .fix)
        }
    }

    package static func report(tenant slug: String, policy: LoginPolicy) -> [PlatformReport] {
        policy.report.map { platform, compliance in
            let offered = policy.providers(on: platform)
            var status = "compliant"
            var exemption: LoginPolicyExemption?
            var fix: String?
            switch compliance {
            case .compliant: break
            case .exempt(let recorded):
                status = "exempt"
                exemption = recorded
            case .violation:
                status = "violation"
                fix = Self.fix(tenant: slug, platform: platform, policy: policy)
            }
            return PlatformReport(
                tenant: slug, platform: platform, status: status, mode: policy.settings.mode,
                nonQualifyingProviders: offered.filter { !policy.qualifies($0) }, qualifyingProviders: offered.filter(policy.qualifies),
                exemption: exemption, fix: fix)
        }
    }
}

// MARK: - The guard

extension PolicyAdmin {
    /// The guard of a change to tenant `slug` (``LoginPolicyGuard``): ``enforce`` on the policy
    /// before and after it, inside its transaction.
    public static func `guard`(tenant slug: String, action: String, command: String, force: Bool) -> LoginPolicyGuard {
        LoginPolicyGuard(action: action, command: "\(command) --tenant \(slug)") { before, after in
            try enforce(before: before, after: after, tenant: slug, force: force)
        }
    }

    /// Guideline 4.8 on a change: the violations it adds (``LoginPolicy/violationsAdded(by:)``;
    /// those that stood before do not count, so a tenant already in violation can still make
    /// unrelated changes). Throws `login_policy_violation`, saying what would make it
    /// compliant, unless `force`; with `force` returns them, to be recorded in the audit log as
    /// `policy.violation_forced`.
    public static func enforce(before: LoginPolicy, after: LoginPolicy, tenant slug: String, force: Bool) throws
        -> Set<LoginPolicy.Violation>
    {
        let added = before.violationsAdded(by: after)
        guard !added.isEmpty, !force else { return added }
        let platforms = LoginPolicy.applePlatforms.filter { platform in added.contains { $0.platform == platform } }
        let what = platforms.map { platform in
            let providers = added.filter { $0.platform == platform }.map(\.provider.rawValue).sorted()
            return "\(providers.joined(separator: " and ")) on \(platform.rawValue)"
        }
        let equivalent =
            after.settings.mode == .appleRequired
            ? "Sign in with Apple (mode apple-required)"
            : "a qualifying login option (Sign in with Apple, or a provider attested with 'broker provider attest')"
        let fixes = platforms.map { "\($0.rawValue): \(fix(tenant: slug, platform: $0, policy: after))" }
        throw BrokerError.loginPolicyViolation(
            "This breaks App Store Review Guideline 4.8 for tenant '\(slug)': \(what.joined(separator: "; ")) would be offered without \(equivalent) there. Nothing was changed.",
            hint:
                "Make it compliant first. \(fixes.joined(separator: " ")) Or repeat the command with --force to apply it anyway (recorded in the audit log as policy.violation_forced)."
        )
    }

    /// What would make `platform` compliant, as commands: Sign in with Apple there, an
    /// attestation (privacy-equivalent only), leaving the platform out of the providers'
    /// `--platforms`, or an exemption.
    public static func fix(tenant slug: String, platform: ProviderPlatform, policy: LoginPolicy) -> String {
        var options: [String] = []
        if policy.offered.contains(where: { $0.provider == .apple }) {
            options.append(
                "add an App ID for \(platform.rawValue) (broker apple client add --tenant \(slug) --group <PRIMARY-APP-ID> --client-id <BUNDLE-ID> --kind app --platforms \(platform.rawValue))"
            )
        } else {
            options.append(
                "add Sign in with Apple for \(platform.rawValue) (broker apple group add --tenant \(slug) --primary-app-id <BUNDLE-ID> --platforms \(platform.rawValue), after 'broker apple team set')"
            )
        }
        let nonQualifying = policy.providers(on: platform).filter { !policy.qualifies($0) }
        if policy.settings.mode == .privacyEquivalent, let attestable = nonQualifying.first(where: { $0 != .apple }) {
            options.append("attest \(attestable.rawValue) if it meets the three criteria (\(attestCommand(slug, attestable)))")
        }
        if !nonQualifying.isEmpty {
            options.append(
                "offer \(nonQualifying.map(\.rawValue).joined(separator: " and ")) without \(platform.rawValue) (broker provider enable ... --platforms <LIST WITHOUT \(platform.rawValue.uppercased())>)"
            )
        }
        options.append(
            "record an exemption if one applies (broker policy exempt --tenant \(slug) --reason <\(LoginPolicyExemptionReason.allCases.map(\.rawValue).joined(separator: "|"))> --note \"...\")"
        )
        return options.joined(separator: "; or ") + "."
    }

    package static func attestCommand(_ slug: String, _ provider: ProviderID) -> String {
        "broker provider attest --tenant \(slug) --provider \(provider.rawValue) --limits-data-to-name-email --private-email --no-ad-tracking"
    }

    package static func attestable(_ provider: ProviderID, tenant slug: String) throws {
        guard provider != .apple else {
            throw BrokerError.invalidArgument(
                "Sign in with Apple qualifies under App Store Review Guideline 4.8 built in; it takes no attestation.",
                hint: "Attest Google or Facebook instead: \(attestCommand(slug, .google))")
        }
    }
}

import Foundation

/// Which text of App Store guideline 4.8 a tenant is held to (decision 0026).
public enum LoginPolicyMode: String, Sendable, CaseIterable, Codable {
    /// The text since January 2024: an equivalent login option that limits data to name and
    /// email, lets people keep their email private and collects no interactions for advertising
    /// without consent. Sign in with Apple qualifies; others qualify when attested.
    case privacyEquivalent = "privacy-equivalent"
    /// The 2020 text: Sign in with Apple itself.
    case appleRequired = "apple-required"
}

/// The guideline's five exemptions (`broker policy exempt --reason`).
public enum LoginPolicyExemptionReason: String, Sendable, CaseIterable, Codable {
    /// The app uses only the company's own account system.
    case ownAccountsOnly = "own-accounts-only"
    /// An alternative app marketplace, or an app distributed from one, with its own login.
    case alternativeMarketplace = "alternative-marketplace"
    /// Education, enterprise or business apps that require existing accounts.
    case educationEnterprise = "education-enterprise"
    /// A government or industry-backed citizen identification system or electronic ID.
    case governmentID = "government-id"
    /// A client for a specific third-party service, signed in to that service's account.
    case thirdPartyClient = "third-party-client"
}

/// A tenant's recorded exemption from the rule.
public struct LoginPolicyExemption: Sendable, Equatable, Codable {
    public var reason: LoginPolicyExemptionReason
    public var note: String
    public var since: Date

    public init(reason: LoginPolicyExemptionReason, note: String, since: Date) {
        self.reason = reason
        self.note = note
        self.since = since
    }
}

/// A tenant's policy settings (columns of `tenants`).
public struct LoginPolicySettings: Sendable, Equatable {
    public var mode: LoginPolicyMode
    public var exemption: LoginPolicyExemption?

    public static let `default` = LoginPolicySettings(mode: .privacyEquivalent, exemption: nil)

    public init(mode: LoginPolicyMode, exemption: LoginPolicyExemption?) {
        self.mode = mode
        self.exemption = exemption
    }
}

/// An operator's statement that a provider, as the tenant configured it, meets the three
/// criteria of the current text (`broker provider attest`). Apple needs none.
public struct ProviderAttestation: Sendable, Equatable {
    public var provider: ProviderID
    public var attestedAt: Date
    public var attestedBy: String

    public init(provider: ProviderID, attestedAt: Date, attestedBy: String) {
        self.provider = provider
        self.attestedAt = attestedAt
        self.attestedBy = attestedBy
    }
}

/// A provider as the rule sees it: where it is offered, and whether it is attested.
public struct OfferedProvider: Sendable, Equatable {
    public var provider: ProviderID
    /// The platforms it is offered on. Apple: the platforms of its clients (an App ID `ios`
    /// unless told otherwise, a Services ID `web` and `android`). Google and Facebook: their
    /// `--platforms`, where an empty list means every platform.
    public var platforms: Set<ProviderPlatform>
    public var attested: Bool

    public init(provider: ProviderID, platforms: Set<ProviderPlatform>, attested: Bool) {
        self.provider = provider
        self.platforms = platforms
        self.attested = attested
    }
}

/// How one Apple platform of a tenant stands under the rule.
public enum PlatformCompliance: Sendable, Equatable {
    case compliant
    case exempt(LoginPolicyExemption)
    /// Providers that do not qualify are offered and no qualifying one is.
    case violation(nonQualifying: [ProviderID])
}

/// Guideline 4.8, per tenant and per Apple platform: when a social provider that does not
/// qualify is offered on the platform, a qualifying one (Apple only, under `apple-required`)
/// must be offered there too, unless the tenant is exempt. Pure: the CLI, `policy check`,
/// login options and sign-in counting all evaluate the same snapshot with it.
public struct LoginPolicy: Sendable, Equatable {
    /// The platforms the guideline governs (App Store apps).
    public static let applePlatforms: [ProviderPlatform] = [.ios, .macos]

    public var settings: LoginPolicySettings
    public var offered: [OfferedProvider]

    public init(settings: LoginPolicySettings, offered: [OfferedProvider]) {
        self.settings = settings
        self.offered = offered
    }

    /// Whether a provider counts as the equivalent option under this mode.
    public func qualifies(_ provider: ProviderID) -> Bool {
        if provider == .apple { return true }
        guard settings.mode == .privacyEquivalent else { return false }
        return offered.first { $0.provider == provider }?.attested ?? false
    }

    /// The providers offered on a platform, in the order of `offered`.
    public func providers(on platform: ProviderPlatform) -> [ProviderID] {
        offered.filter { $0.platforms.contains(platform) }.map(\.provider)
    }

    public func compliance(on platform: ProviderPlatform) -> PlatformCompliance {
        guard Self.applePlatforms.contains(platform) else { return .compliant }
        let there = providers(on: platform)
        let nonQualifying = there.filter { !qualifies($0) }
        if nonQualifying.isEmpty || there.contains(where: qualifies) { return .compliant }
        if let exemption = settings.exemption { return .exempt(exemption) }
        return .violation(nonQualifying: nonQualifying)
    }

    /// Every Apple platform's standing, `ios` first.
    public var report: [(platform: ProviderPlatform, compliance: PlatformCompliance)] {
        Self.applePlatforms.map { ($0, compliance(on: $0)) }
    }

    /// The (platform, provider) pairs in violation.
    public var violations: Set<Violation> {
        var found: Set<Violation> = []
        for platform in Self.applePlatforms {
            if case .violation(let providers) = compliance(on: platform) {
                for provider in providers { found.insert(Violation(platform: platform, provider: provider)) }
            }
        }
        return found
    }

    /// Violations a change would add: what `after` breaks that this snapshot did not.
    public func violationsAdded(by after: LoginPolicy) -> Set<Violation> {
        after.violations.subtracting(violations)
    }

    public struct Violation: Sendable, Hashable, Comparable {
        public var platform: ProviderPlatform
        public var provider: ProviderID

        public init(platform: ProviderPlatform, provider: ProviderID) {
            self.platform = platform
            self.provider = provider
        }

        public static func < (a: Self, b: Self) -> Bool {
            (a.platform, a.provider.rawValue) < (b.platform, b.provider.rawValue)
        }
    }
}

import BrokerCore
import Foundation
import Testing

/// Guideline 4.8 as ``LoginPolicy`` rules it (decision 0026): every provider set, in both modes,
/// exempt or not, on every platform.
@Suite struct LoginPolicyTests {
    /// A provider set and, per mode, the providers in violation on each platform (none listed:
    /// compliant there).
    struct ProviderSet: Sendable {
        let name: String
        let offered: [OfferedProvider]
        let privacyEquivalent: [ProviderPlatform: [ProviderID]]
        let appleRequired: [ProviderPlatform: [ProviderID]]
    }

    static let everywhere = Set(ProviderPlatform.allCases)

    static func apple(_ platforms: Set<ProviderPlatform>) -> OfferedProvider {
        OfferedProvider(provider: .apple, platforms: platforms, attested: false)
    }

    static func google(_ platforms: Set<ProviderPlatform> = everywhere, attested: Bool = false) -> OfferedProvider {
        OfferedProvider(provider: .google, platforms: platforms, attested: attested)
    }

    static func facebook(_ platforms: Set<ProviderPlatform> = everywhere, attested: Bool = false) -> OfferedProvider {
        OfferedProvider(provider: .facebook, platforms: platforms, attested: attested)
    }

    static let sets: [ProviderSet] = [
        ProviderSet(name: "none", offered: [], privacyEquivalent: [:], appleRequired: [:]),
        ProviderSet(name: "apple only (ios)", offered: [apple([.ios])], privacyEquivalent: [:], appleRequired: [:]),
        ProviderSet(
            name: "google only, everywhere", offered: [google()], privacyEquivalent: [.ios: [.google], .macos: [.google]],
            appleRequired: [.ios: [.google], .macos: [.google]]),
        ProviderSet(
            name: "google everywhere + apple (ios)", offered: [apple([.ios]), google()], privacyEquivalent: [.macos: [.google]],
            appleRequired: [.macos: [.google]]),
        ProviderSet(
            name: "google attested only", offered: [google(attested: true)], privacyEquivalent: [:],
            appleRequired: [.ios: [.google], .macos: [.google]]),
        ProviderSet(
            name: "facebook attested only", offered: [facebook(attested: true)], privacyEquivalent: [:],
            appleRequired: [.ios: [.facebook], .macos: [.facebook]]),
        ProviderSet(
            name: "google attested + facebook not", offered: [google(attested: true), facebook()], privacyEquivalent: [:],
            appleRequired: [.ios: [.google, .facebook], .macos: [.google, .facebook]]),
        ProviderSet(
            name: "google + facebook, neither attested", offered: [google(), facebook()],
            privacyEquivalent: [.ios: [.google, .facebook], .macos: [.google, .facebook]],
            appleRequired: [.ios: [.google, .facebook], .macos: [.google, .facebook]]),
        ProviderSet(
            name: "google on android and web only", offered: [google([.android, .web])], privacyEquivalent: [:], appleRequired: [:]),
        ProviderSet(
            name: "apple (ios, macos) + facebook everywhere", offered: [apple([.ios, .macos]), facebook()], privacyEquivalent: [:],
            appleRequired: [:]),
        ProviderSet(
            name: "google on macos + apple (ios)", offered: [apple([.ios]), google([.macos])], privacyEquivalent: [.macos: [.google]],
            appleRequired: [.macos: [.google]]),
        ProviderSet(
            name: "apple services id (web, android) + google everywhere", offered: [apple([.web, .android]), google()],
            privacyEquivalent: [.ios: [.google], .macos: [.google]], appleRequired: [.ios: [.google], .macos: [.google]]),
        ProviderSet(
            name: "google attested on ios + apple (macos) + facebook everywhere",
            offered: [apple([.macos]), google([.ios], attested: true), facebook()], privacyEquivalent: [:],
            appleRequired: [.ios: [.google, .facebook]]),
    ]

    /// One cell of the matrix.
    struct Cell: Sendable, CustomTestStringConvertible {
        let set: ProviderSet
        let mode: LoginPolicyMode
        let exempt: Bool
        let platform: ProviderPlatform

        var testDescription: String {
            "\(set.name), \(mode.rawValue)\(exempt ? ", exempt" : ""), \(platform.rawValue)"
        }

        /// What the rule must say: the listed providers in violation, or exempt when they would
        /// be and the tenant is; android and web are never governed.
        var expected: PlatformCompliance {
            let violating = (mode == .privacyEquivalent ? set.privacyEquivalent : set.appleRequired)[platform] ?? []
            if violating.isEmpty { return .compliant }
            return exempt ? .exempt(LoginPolicyTests.exemption) : .violation(nonQualifying: violating)
        }
    }

    static let exemption = LoginPolicyExemption(
        reason: .educationEnterprise, note: "Staff app; company accounts only", since: Date(timeIntervalSince1970: 1_700_000_000))

    static let cells: [Cell] = sets.flatMap { set in
        LoginPolicyMode.allCases.flatMap { mode in
            [false, true].flatMap { exempt in
                ProviderPlatform.allCases.map { Cell(set: set, mode: mode, exempt: exempt, platform: $0) }
            }
        }
    }

    @Test(arguments: cells) func matrix(_ cell: Cell) {
        let policy = LoginPolicy(
            settings: LoginPolicySettings(mode: cell.mode, exemption: cell.exempt ? Self.exemption : nil), offered: cell.set.offered)
        #expect(policy.compliance(on: cell.platform) == cell.expected)
        let listed = policy.violations.filter { $0.platform == cell.platform }.map(\.provider)
        if case .violation(let providers) = cell.expected {
            #expect(Set(listed) == Set(providers))
        } else {
            #expect(listed.isEmpty)
        }
    }

    @Test func everyCellOfTheMatrixIsThere() {
        #expect(Self.cells.count == Self.sets.count * 2 * 2 * 4)
        // Android and the web are never in violation.
        for cell in Self.cells where cell.platform == .android || cell.platform == .web {
            #expect(cell.expected == .compliant)
        }
    }

    @Test func appleQualifiesBuiltInAndAttestedProvidersOnlyUnderPrivacyEquivalent() {
        let offered = [Self.apple([.ios]), Self.google(attested: true), Self.facebook()]
        let current = LoginPolicy(settings: .default, offered: offered)
        #expect(current.qualifies(.apple) && current.qualifies(.google) && !current.qualifies(.facebook))
        let strict = LoginPolicy(settings: LoginPolicySettings(mode: .appleRequired, exemption: nil), offered: offered)
        #expect(strict.qualifies(.apple) && !strict.qualifies(.google) && !strict.qualifies(.facebook))
        // Not offered: an attestation alone does not make a provider qualify anywhere.
        #expect(!LoginPolicy(settings: .default, offered: []).qualifies(.google))
        #expect(current.report.map(\.platform) == [.ios, .macos])
        #expect(current.providers(on: .ios) == [.apple, .google, .facebook])
    }

    @Test func aChangeBreaksTheRuleOnlyWhenItAddsViolations() {
        let violating = LoginPolicy(settings: .default, offered: [Self.google()])
        #expect(violating.violations.count == 2)
        // An unrelated change by a tenant already in violation adds none.
        let unrelated = LoginPolicy(settings: .default, offered: [Self.google(), Self.apple([.web, .android])])
        #expect(violating.violationsAdded(by: unrelated).isEmpty)
        // Offering Facebook too adds Facebook's.
        let more = LoginPolicy(settings: .default, offered: [Self.google(), Self.facebook([.ios])])
        #expect(
            violating.violationsAdded(by: more) == [LoginPolicy.Violation(platform: .ios, provider: .facebook)])
        // Fixing iOS and breaking nothing else adds none.
        let fixed = LoginPolicy(settings: .default, offered: [Self.apple([.ios]), Self.google()])
        #expect(violating.violationsAdded(by: fixed).isEmpty)
        // Switching to apple-required when only attested Google covers iOS adds it.
        let attested = LoginPolicy(settings: .default, offered: [Self.google([.ios], attested: true)])
        var strict = attested
        strict.settings.mode = .appleRequired
        #expect(attested.violationsAdded(by: strict) == [LoginPolicy.Violation(platform: .ios, provider: .google)])
        // Clearing an exemption something depends on adds what it covered.
        let exempt = LoginPolicy(
            settings: LoginPolicySettings(mode: .privacyEquivalent, exemption: Self.exemption), offered: [Self.facebook([.macos])])
        var cleared = exempt
        cleared.settings.exemption = nil
        #expect(exempt.violations.isEmpty)
        #expect(exempt.violationsAdded(by: cleared) == [LoginPolicy.Violation(platform: .macos, provider: .facebook)])
    }
}

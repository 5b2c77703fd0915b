import Foundation

/// A guideline 4.8 attestation ends with the configuration it was given for (issue 20 §7).
///
/// An attestation says that a provider, as the tenant configured it, meets the three criteria.
/// What the provider is, as far as those criteria go, is which app or clients people sign in
/// through and how: Google's client ids and hosted domain, Facebook's app id and whether Limited
/// Login is on. Disabling the provider, or changing any of those, withdraws the attestation in
/// the change's own transaction, and the guard judges the change without it. Where the provider
/// is offered (`--platforms`) is not how it works: a platform change keeps the attestation (the
/// guard still judges the new platforms), and so does a new Facebook app secret for the same app.
public struct AttestationWithdrawal: Sendable, Equatable {
    /// Why: the provider was disabled, or its configuration changed.
    public enum Reason: String, Sendable, Equatable {
        case providerDisabled = "provider_disabled"
        case configurationChanged = "configuration_changed"
    }

    public var provider: ProviderID
    public var reason: Reason
    /// With ``Reason/configurationChanged``: what changed (`client_ids`, `hosted_domain`,
    /// `app_id`, `limited_login`).
    public var changed: [String]
    /// The attestation withdrawn.
    public var attestation: ProviderAttestation

    public init(provider: ProviderID, reason: Reason, changed: [String], attestation: ProviderAttestation) {
        self.provider = provider
        self.reason = reason
        self.changed = changed
        self.attestation = attestation
    }
}

extension ProviderConfiguration {
    /// What an attestation of this configuration covers that `replacement` changes (empty: the
    /// attestation still holds). Client ids compare as a set: their order means nothing.
    /// Settings that say nothing about how people sign in: the name shown, what discovery found.
    public static let settingsOutsideAttestation: Set<String> = ["display_name", "discovered_jwks_uri", "discovered_algorithms"]

    public func attestedSettingsChanged(by replacement: ProviderConfiguration) -> [String] {
        var changed: [String] = []
        if type != replacement.type { changed.append("type") }
        if Set(clientIDs) != Set(replacement.clientIDs) { changed.append(type == .facebook ? "app_id" : "client_ids") }
        let names = Set(settings.keys).union(replacement.settings.keys).subtracting(Self.settingsOutsideAttestation)
        for name in names.sorted() where !Self.sameSetting(settings[name], replacement.settings[name]) {
            changed.append(name)
        }
        return changed
    }

    /// Equal, ignoring the case of strings (domains and URLs compare case-insensitively here)
    /// and the order of lists.
    private static func sameSetting(_ a: JSONValue?, _ b: JSONValue?) -> Bool {
        switch (a, b) {
        case (.string(let x)?, .string(let y)?): x.lowercased() == y.lowercased()
        case (.array(let x)?, .array(let y)?):
            Set(x.compactMap { $0.string?.lowercased() }) == Set(y.compactMap { $0.string?.lowercased() }) && x.count == y.count
        default: a == b
        }
    }
}

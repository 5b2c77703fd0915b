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

    public var provider: ProviderName
    public var reason: Reason
    /// With ``Reason/configurationChanged``: what changed (`client_ids`, `hosted_domain`,
    /// `app_id`, `limited_login`).
    public var changed: [String]
    /// The attestation withdrawn.
    public var attestation: ProviderAttestation

    public init(provider: ProviderName, reason: Reason, changed: [String], attestation: ProviderAttestation) {
        self.provider = provider
        self.reason = reason
        self.changed = changed
        self.attestation = attestation
    }
}

extension ProviderConfiguration {
    /// What an attestation of this configuration covers that `replacement` changes (empty: the
    /// attestation still holds). Client ids compare as a set: their order means nothing.
    public func attestedSettingsChanged(by replacement: ProviderConfiguration) -> [String] {
        var changed: [String] = []
        switch provider {
        case .google:
            if Set(clientIDs) != Set(replacement.clientIDs) { changed.append("client_ids") }
            if hostedDomain?.lowercased() != replacement.hostedDomain?.lowercased() { changed.append("hosted_domain") }
        case .facebook:
            if appID != replacement.appID { changed.append("app_id") }
            if limitedLogin != replacement.limitedLogin { changed.append("limited_login") }
        case .apple:
            break
        }
        return changed
    }
}

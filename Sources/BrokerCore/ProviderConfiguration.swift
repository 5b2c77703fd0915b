import Foundation

/// The identity providers the broker federates. Each has its adapter in `Providers` and is
/// registered by this name (`POST /v1/sign-in/{name}`, `identity.provider`).
public enum ProviderName: String, Sendable, CaseIterable, Codable {
    case apple, google, facebook
}

/// Where a provider is offered to people (`--platforms`). Recorded for the login options and the
/// guideline 4.8 policy; sign-ins are not refused by platform.
public enum ProviderPlatform: String, Sendable, CaseIterable, Codable, Comparable {
    case ios, android, web, macos

    public static func < (a: Self, b: Self) -> Bool {
        allCases.firstIndex(of: a) ?? 0 < allCases.firstIndex(of: b) ?? 0
    }

    /// `ios,android,web,macos` (comma-separated, any order, no repeats); nil when a name is unknown.
    public static func parseList(_ text: String) -> [ProviderPlatform]? {
        let names = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        var platforms: [ProviderPlatform] = []
        for name in names {
            guard let platform = ProviderPlatform(rawValue: name.lowercased()), !platforms.contains(platform) else { return nil }
            platforms.append(platform)
        }
        return platforms.isEmpty ? nil : platforms.sorted()
    }
}

/// A tenant's settings of a provider configured by `broker provider enable` (Google and
/// Facebook; Apple's live in its team, group and client tables). One shape for both: the row of
/// `provider_configs`.
public struct ProviderConfiguration: Sendable, Equatable {
    public var tenantID: UUID
    public var provider: ProviderName
    public var platforms: [ProviderPlatform]
    /// Google: the accepted OAuth client ids. Facebook: the app id (one).
    public var clientIDs: [String]
    /// Google: the Workspace domain tokens must carry in `hd`, when set.
    public var hostedDomain: String?
    /// Facebook: the app secret, sealed (``SecretBox``); never shown.
    public var sealedSecret: Data?
    /// Facebook: Limited Login tokens are accepted.
    public var limitedLogin: Bool
    public var createdAt: Date
    public var updatedAt: Date

    public init(
        tenantID: UUID, provider: ProviderName, platforms: [ProviderPlatform], clientIDs: [String], hostedDomain: String? = nil,
        sealedSecret: Data? = nil, limitedLogin: Bool = false, createdAt: Date = Date(), updatedAt: Date = Date()
    ) {
        self.tenantID = tenantID
        self.provider = provider
        self.platforms = platforms
        self.clientIDs = clientIDs
        self.hostedDomain = hostedDomain
        self.sealedSecret = sealedSecret
        self.limitedLogin = limitedLogin
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    /// Facebook's app id.
    public var appID: String? { provider == .facebook ? clientIDs.first : nil }

    /// The context a Facebook app secret is sealed under: a sealed secret moved to another
    /// tenant or app does not open.
    public static func secretContext(tenantID: UUID, provider: ProviderName, clientID: String) -> String {
        "provider_secret:\(tenantID.lowercasedString):\(provider.rawValue):\(clientID)"
    }
}

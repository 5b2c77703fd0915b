import Foundation

/// A tenant's provider, as the API and the CLI name it (`POST /v1/sign-in/{id}`,
/// `identity.provider`): a slug `[a-z][a-z0-9-]{1,31}` (decision 0034). `apple`, `google` and
/// `facebook` are reserved for the providers of their own types; any other id is the
/// operator's (an OpenID Connect provider such as `line`). An open set: the broker never turns an
/// id it does not know into another provider.
public struct ProviderID: RawRepresentable, Sendable, Hashable, Codable, Comparable, CustomStringConvertible {
    public let rawValue: String

    /// nil unless `rawValue` is a slug `[a-z][a-z0-9-]{1,31}`.
    public init?(rawValue: String) {
        guard Self.isSlug(rawValue) else { return nil }
        self.rawValue = rawValue
    }

    private init(reserved: String) { rawValue = reserved }

    public static let apple = ProviderID(reserved: "apple")
    public static let google = ProviderID(reserved: "google")
    public static let facebook = ProviderID(reserved: "facebook")

    /// The ids reserved for the built-in types, each for the type of its own name.
    public static let reserved: [ProviderID] = [.apple, .google, .facebook]

    /// The built-in type this id is reserved for, if it is one of ``reserved``.
    public var reservedType: ProviderType? { Self.reserved.contains(self) ? ProviderType(rawValue: rawValue) : nil }

    /// Built-ins first (Apple, Google, Facebook), then the operator's ids alphabetically.
    public static func < (a: Self, b: Self) -> Bool {
        let order = { (id: Self) in reserved.firstIndex(of: id) ?? reserved.count }
        return (order(a), a.rawValue) < (order(b), b.rawValue)
    }

    public var description: String { rawValue }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let id = ProviderID(rawValue: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a provider id"))
        }
        self = id
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    static func isSlug(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard (2...32).contains(bytes.count), let first = bytes.first, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first)
        else { return false }
        return bytes.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: "-")
        }
    }
}

/// What kind of provider an id is: which code verifies its proofs and reads its settings
/// (decision 0034). Built in: `apple`, `google`, `facebook`, `oidc`; the registry is open, so a
/// type is a name, not a closed enum.
public struct ProviderType: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    public static let apple = ProviderType(rawValue: "apple")
    public static let google = ProviderType(rawValue: "google")
    public static let facebook = ProviderType(rawValue: "facebook")
    public static let oidc = ProviderType(rawValue: "oidc")

    public var description: String { rawValue }
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

/// A tenant's provider as `broker provider enable` configured it: the row of `provider_configs`
/// (decision 0034). Common members are columns; what only its type understands is `settings`,
/// a JSON object the type's descriptor validates. Apple's clients, groups and team live in
/// their own tables; its row, when there is one, only says whether it is enabled.
public struct ProviderConfiguration: Sendable, Equatable {
    public var tenantID: UUID
    public var provider: ProviderID
    public var type: ProviderType
    /// A disabled provider keeps its settings and identities; its sign-ins answer
    /// `provider_not_enabled`.
    public var enabled: Bool
    public var platforms: [ProviderPlatform]
    /// The accepted client ids (Google's OAuth clients, an OIDC provider's clients); Facebook:
    /// the app id (one).
    public var clientIDs: [String]
    /// The type's own settings (e.g. Google's `hosted_domain`, an OIDC issuer).
    public var settings: [String: JSONValue]
    /// Facebook: the app secret, sealed (``SecretBox``); never shown.
    public var sealedSecret: Data?
    public var createdAt: Date
    public var updatedAt: Date

    public init(
        tenantID: UUID, provider: ProviderID, type: ProviderType? = nil, enabled: Bool = true, platforms: [ProviderPlatform],
        clientIDs: [String], settings: [String: JSONValue] = [:], hostedDomain: String? = nil, sealedSecret: Data? = nil,
        limitedLogin: Bool = false, createdAt: Date = Date(), updatedAt: Date = Date()
    ) {
        self.tenantID = tenantID
        self.provider = provider
        self.type = type ?? provider.reservedType ?? .oidc
        self.enabled = enabled
        self.platforms = platforms
        self.clientIDs = clientIDs
        self.settings = settings
        self.sealedSecret = sealedSecret
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        if let hostedDomain { self.hostedDomain = hostedDomain }
        if limitedLogin { self.limitedLogin = true }
    }

    /// Google: the Workspace domain tokens must carry in `hd`, when set.
    public var hostedDomain: String? {
        get { settings["hosted_domain"]?.string }
        set { settings["hosted_domain"] = newValue.map(JSONValue.string) }
    }

    /// Facebook: Limited Login tokens are accepted.
    public var limitedLogin: Bool {
        get { settings["limited_login"] == .bool(true) }
        set { settings["limited_login"] = newValue ? .bool(true) : nil }
    }

    /// A setting that is a string.
    public func string(_ name: String) -> String? { settings[name]?.string }

    /// A setting that is a list of strings (absent: empty).
    public func strings(_ name: String) -> [String] { settings[name]?.array?.compactMap(\.string) ?? [] }

    /// The name people see in login options: the operator's `display_name`, else the id.
    public var displayName: String? { string("display_name") }

    /// Facebook's app id.
    public var appID: String? { type == .facebook ? clientIDs.first : nil }

    /// The context a Facebook app secret is sealed under: a sealed secret moved to another
    /// tenant or app does not open.
    public static func secretContext(tenantID: UUID, provider: ProviderID, clientID: String) -> String {
        "provider_secret:\(tenantID.lowercasedString):\(provider.rawValue):\(clientID)"
    }
}

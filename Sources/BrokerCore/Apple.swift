import Foundation

/// How a token's `nonce` is compared with the raw nonce the backend sends, per client.
public enum NonceMode: String, Sendable, Codable, CaseIterable {
    /// The app sent SHA-256(raw nonce), hex, to the provider (Apple's documented practice).
    case sha256
    /// The app sent the raw nonce as is.
    case raw
}

public enum AppleClientKind: String, Sendable, Codable, CaseIterable {
    /// An App ID (bundle id): native sign-in.
    case app
    /// A Services ID: the web flow.
    case service

    /// The platforms a client of this kind may be offered on: an App ID in iOS and macOS apps,
    /// a Services ID on the web and in Android apps (Apple's web flow).
    public var allowedPlatforms: [ProviderPlatform] {
        switch self {
        case .app: [.ios, .macos]
        case .service: [.android, .web]
        }
    }

    /// Where a client counts when not told otherwise: an App ID on iOS, a Services ID on the web
    /// and Android.
    public var defaultPlatforms: [ProviderPlatform] {
        switch self {
        case .app: [.ios]
        case .service: [.android, .web]
        }
    }

    /// Checks `--platforms` of a client of this kind.
    public func validatePlatforms(_ platforms: [ProviderPlatform]) throws(BrokerError) {
        let allowed = allowedPlatforms
        guard !platforms.isEmpty, platforms.allSatisfy(allowed.contains) else {
            let names = allowed.map(\.rawValue).joined(separator: ",")
            throw .invalidArgument(
                "\(self == .app ? "An App ID" : "A Services ID") is offered on \(allowed.map(\.rawValue).joined(separator: " and ")) only, not on \(platforms.filter { !allowed.contains($0) }.map(\.rawValue).joined(separator: ",")).",
                rule: "apple_client_platforms", arguments: ["allowed": names, "kind": rawValue])
        }
    }
}

/// A tenant's Apple developer team: `sub` values are scoped to it. The `.p8` key signs client
/// secrets for the token endpoint.
public struct AppleTeam: Sendable, Equatable {
    public var id: UUID
    public var tenantID: UUID
    public var teamID: String
    public var keyID: String?
    public var sealedPrivateKey: Data?
    public var createdAt: Date

    public init(id: UUID, tenantID: UUID, teamID: String, keyID: String?, sealedPrivateKey: Data?, createdAt: Date) {
        self.id = id
        self.tenantID = tenantID
        self.teamID = teamID
        self.keyID = keyID
        self.sealedPrivateKey = sealedPrivateKey
        self.createdAt = createdAt
    }

    public static func sealingContext(tenantID: UUID, teamID: String) -> String {
        "apple_p8:\(tenantID.lowercasedString):\(teamID)"
    }

    /// Apple team ids and key ids: 10 characters, uppercase letters and digits.
    public static func validateIdentifier(_ value: String, name: String) throws(BrokerError) {
        guard value.count == 10, value.unicodeScalars.allSatisfy({ ("A"..."Z").contains($0) || ("0"..."9").contains($0) })
        else {
            throw .invalidArgument(
                "The \(name) '\(value.prefix(40))' is not 10 uppercase letters and digits.", rule: "apple_identifier")
        }
    }
}

/// A primary App ID with its grouped App IDs and Services IDs: one person, one account across
/// them.
public struct AppleAppGroup: Sendable, Equatable {
    public var id: UUID
    public var tenantID: UUID
    public var teamRef: UUID?
    public var primaryAppID: String

    public init(id: UUID, tenantID: UUID, teamRef: UUID?, primaryAppID: String) {
        self.id = id
        self.tenantID = tenantID
        self.teamRef = teamRef
        self.primaryAppID = primaryAppID
    }
}

/// A client id the tenant accepts tokens for: a bundle id (`app`) or a Services ID (`service`).
public struct AppleClient: Sendable, Equatable {
    public var id: UUID
    public var tenantID: UUID
    public var groupID: UUID
    public var clientID: String
    public var kind: AppleClientKind
    public var nonceMode: NonceMode
    public var redirectURIs: [String]
    public var returnURLs: [String]
    /// A sign-in through this client must send a nonce (decision 0016).
    public var nonceRequired: Bool
    /// Where Sign in with Apple is offered through this client, for the guideline 4.8 policy
    /// (decision 0026): an App ID on `ios` and/or `macos`, a Services ID on `web` and/or `android`.
    public var platforms: [ProviderPlatform]

    /// `platforms` nil: the kind's default (``AppleClientKind/defaultPlatforms``).
    public init(
        id: UUID, tenantID: UUID, groupID: UUID, clientID: String, kind: AppleClientKind, nonceMode: NonceMode,
        redirectURIs: [String], returnURLs: [String], nonceRequired: Bool = true, platforms: [ProviderPlatform]? = nil
    ) {
        self.nonceRequired = nonceRequired
        self.platforms = (platforms ?? kind.defaultPlatforms).sorted()
        self.id = id
        self.tenantID = tenantID
        self.groupID = groupID
        self.clientID = clientID
        self.kind = kind
        self.nonceMode = nonceMode
        self.redirectURIs = redirectURIs
        self.returnURLs = returnURLs
    }

    /// Bundle ids and Services IDs: reverse-DNS of letters, digits, dashes and dots.
    public static func validateClientID(_ value: String) throws(BrokerError) {
        let allowed = value.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "." || $0 == "-"
        }
        guard (3...155).contains(value.count), allowed, value.contains("."), !value.hasPrefix("."), !value.hasSuffix(".")
        else {
            throw .invalidArgument(
                "'\(value.prefix(60))' is not a bundle id or Services ID (reverse-DNS, e.g. com.example.app).")
        }
    }
}

/// Everything sign-in needs to know about a client id, resolved in one lookup.
public struct ResolvedAppleClient: Sendable, Equatable {
    public var client: AppleClient
    public var group: AppleAppGroup
    public var team: AppleTeam

    public init(client: AppleClient, group: AppleAppGroup, team: AppleTeam) {
        self.client = client
        self.group = group
        self.team = team
    }
}

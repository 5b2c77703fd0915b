import Crypto
import Foundation

/// A relying party of a tenant: one of the product's own apps that signs people in through the
/// tenant's OpenID Provider endpoints (issue 42, decision 0081). A confidential client (a web
/// backend) authenticates with its secret, of which only the SHA-256 is stored; a public client
/// (a mobile or single-page app) has none and must use PKCE.
public struct OAuthClient: Sendable, Equatable {
    public var tenantID: UUID
    /// `ibc_` and 22 base64url characters (128 random bits): not a secret, shown in every listing.
    public var clientID: String
    public var name: String
    public var isPublic: Bool
    /// Compared exactly (``RedirectURI/matches(_:registered:isPublic:)``), in the order given.
    public var redirectURIs: [String]
    public var postLogoutRedirectURIs: [String]
    /// `http` redirect URIs on a loopback address are allowed (registered with `--allow-loopback`).
    public var allowLoopback: Bool
    public var createdAt: Date
    /// When the secret was last replaced (nil: the one it was created with, or a public client).
    public var secretRotatedAt: Date?

    public init(
        tenantID: UUID, clientID: String, name: String, isPublic: Bool, redirectURIs: [String], postLogoutRedirectURIs: [String],
        allowLoopback: Bool, createdAt: Date, secretRotatedAt: Date? = nil
    ) {
        self.tenantID = tenantID
        self.clientID = clientID
        self.name = name
        self.isPublic = isPublic
        self.redirectURIs = redirectURIs
        self.postLogoutRedirectURIs = postLogoutRedirectURIs
        self.allowLoopback = allowLoopback
        self.createdAt = createdAt
        self.secretRotatedAt = secretRotatedAt
    }

    public static let idScheme = "ibc_"

    /// A new client id: `ibc_` + 22 base64url characters.
    public static func newClientID() -> String {
        idScheme + Base64URL.encode(Data(SecureRandom.bytes(16)))
    }

    /// Whether `text` has the shape of a client id (checked before it reaches the database).
    public static func isClientID(_ text: String) -> Bool {
        text.utf8.count == idScheme.utf8.count + 22 && text.hasPrefix(idScheme)
            && text.utf8.dropFirst(idScheme.utf8.count).allSatisfy(Base64URL.isAlphabet)
    }
}

/// A confidential client's secret: `ibcs_` + 43 base64url characters (256 random bits). Only its
/// SHA-256 is stored: the secret is random, so a plain hash cannot be brute-forced.
public struct ClientSecret: Sendable {
    public static let scheme = "ibcs_"
    public let value: String

    public static func generate() -> ClientSecret {
        ClientSecret(value: scheme + Base64URL.encode(Data(SecureRandom.bytes(32))))
    }

    private init(value: String) { self.value = value }

    public var hash: Data { Self.hash(value) }

    /// The SHA-256 of a secret as a client presents it.
    public static func hash(_ presented: String) -> Data { Data(SHA256.hash(data: Data(presented.utf8))) }
}

/// A client as the token endpoint authenticates it: its registration and its secret's SHA-256
/// (nil for a public client).
public struct RegisteredClient: Sendable, Equatable {
    public let client: OAuthClient
    public let secretHash: Data?

    public init(client: OAuthClient, secretHash: Data?) {
        self.client = client
        self.secretHash = secretHash
    }

    /// Whether `presentedSecret` authenticates the client (decision 0082): a confidential
    /// client's secret, compared by hash in constant time; a public client only without one.
    public func authenticates(presentedSecret: String?) -> Bool {
        switch (secretHash, presentedSecret) {
        case (nil, nil): true
        case (let stored?, let presented?): ConstantTime.equals(stored, ClientSecret.hash(presented))
        default: false
        }
    }
}

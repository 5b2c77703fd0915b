import Crypto
import Foundation

/// What an API key may do. Keys carry every scope unless created with fewer.
public enum APIKeyScope: String, Sendable, Codable, CaseIterable {
    /// Sign people in, refresh/introspect/revoke sessions.
    case sessions
    /// Read and manage accounts and their identities.
    case accounts
    /// Read the tenant's own settings.
    case tenant

    public static func parseList(_ values: [String]) throws(BrokerError) -> [APIKeyScope] {
        var scopes: [APIKeyScope] = []
        for value in values.flatMap({ $0.split(separator: ",") }) {
            let trimmed = value.trimmingCharacters(in: .whitespaces)
            guard let scope = APIKeyScope(rawValue: trimmed) else {
                throw .invalidArgument(
                    "Unknown scope '\(trimmed.prefix(40))'; the scopes are \(allCases.map(\.rawValue).joined(separator: ", ")).",
                    rule: "api_key_scope")
            }
            if !scopes.contains(scope) { scopes.append(scope) }
        }
        return scopes.isEmpty ? allCases : scopes
    }
}

/// A stored API key: never the key itself, only its hash and a short visible prefix.
public struct APIKeyRecord: Sendable, Equatable, Identifiable {
    public var id: UUID
    public var tenantID: UUID
    public var name: String
    public var prefix: String
    public var scopes: [APIKeyScope]
    public var createdAt: Date
    public var lastUsedAt: Date?
    public var revokedAt: Date?

    public init(
        id: UUID, tenantID: UUID, name: String, prefix: String, scopes: [APIKeyScope],
        createdAt: Date, lastUsedAt: Date?, revokedAt: Date?
    ) {
        self.id = id
        self.tenantID = tenantID
        self.name = name
        self.prefix = prefix
        self.scopes = scopes
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
        self.revokedAt = revokedAt
    }
}

/// The plaintext form of an API key: `ibk_` + 8 visible characters + `_` + 35 secret
/// characters (43 base64url characters: 256 random bits in all). Only its SHA-256 is stored: the key is
/// random, so a plain hash cannot be brute-forced, and lookup by hash is constant-time
/// with respect to the secret.
public struct APIKeyToken: Sendable {
    public static let scheme = "ibk_"
    public let value: String

    public static func generate() -> APIKeyToken {
        let random = SymmetricKey(size: .bits256).withUnsafeBytes { Base64URL.encode(Data($0)) }
        let visible = random.prefix(8)
        let secret = random.dropFirst(8)
        return APIKeyToken(checked: "\(scheme)\(visible)_\(secret)")
    }

    /// Accepts only strings of the exact key shape, so junk never reaches the database.
    /// Checked byte by byte: it runs on every API request.
    public init?(parsing value: String) {
        let bytes = value.utf8
        guard bytes.count == Self.length, value.hasPrefix(Self.scheme) else { return nil }
        for (index, byte) in bytes.enumerated().dropFirst(Self.scheme.utf8.count) {
            if index == Self.scheme.utf8.count + 8 {
                guard byte == UInt8(ascii: "_") else { return nil }
                continue
            }
            guard Base64URL.isAlphabet(byte) else { return nil }
        }
        self.value = value
    }

    /// `ibk_`, 8 visible characters, `_`, 35 secret characters.
    static let length = scheme.utf8.count + 8 + 1 + 35

    private init(checked value: String) { self.value = value }

    /// `ibk_` and the 8 visible characters: enough for an operator to tell keys apart.
    public var prefix: String { String(value.prefix(Self.scheme.count + 8)) }

    public var hash: Data { Data(SHA256.hash(data: Data(value.utf8))) }
}

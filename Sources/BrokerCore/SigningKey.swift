import Crypto
import Foundation

public enum SigningKeyState: String, Sendable, Codable {
    /// Published in the JWKS, not yet signing.
    case next
    /// Signs new access tokens; exactly one per tenant at a time.
    case active
    /// No longer signs; published for a while so tokens it signed still verify.
    case retired
    /// Compromised: neither signs, nor is published, nor verifies the tokens it signed.
    case revoked
}

/// A tenant's ES256 signing key as stored: the public key in the clear, the private key sealed.
public struct SigningKeyRecord: Sendable, Equatable, Identifiable {
    public var id: UUID
    public var tenantID: UUID
    public var kid: String
    public var algorithm: String
    /// X9.63 uncompressed point (0x04 ‖ X ‖ Y).
    public var publicKey: Data
    public var sealedPrivateKey: Data
    public var createdAt: Date
    /// When the key starts signing.
    public var activatesAt: Date
    /// Set when an operator retires the key explicitly.
    public var retiredAt: Date?
    /// Set when an operator revokes the key (`broker keys revoke`): from then on it counts for nothing.
    public var revokedAt: Date?

    public init(
        id: UUID, tenantID: UUID, kid: String, algorithm: String, publicKey: Data, sealedPrivateKey: Data,
        createdAt: Date, activatesAt: Date, retiredAt: Date?, revokedAt: Date? = nil
    ) {
        self.id = id
        self.tenantID = tenantID
        self.kid = kid
        self.algorithm = algorithm
        self.publicKey = publicKey
        self.sealedPrivateKey = sealedPrivateKey
        self.createdAt = createdAt
        self.activatesAt = activatesAt
        self.retiredAt = retiredAt
        self.revokedAt = revokedAt
    }

    /// Whether the key was revoked by `now`.
    public func isRevoked(at now: Date) -> Bool { revokedAt.map { $0 <= now } ?? false }

    /// The associated data its private key is sealed with.
    public static func sealingContext(tenantID: UUID, kid: String) -> String {
        "signing_key:\(tenantID.lowercasedString):\(kid)"
    }
}

/// A key with its state at some instant.
public struct SigningKeyStatus: Sendable, Equatable {
    public var record: SigningKeyRecord
    public var state: SigningKeyState
    /// When it stopped signing (explicit retirement or being superseded).
    public var retiredSince: Date?

    public init(record: SigningKeyRecord, state: SigningKeyState, retiredSince: Date?) {
        self.record = record
        self.state = state
        self.retiredSince = retiredSince
    }
}

/// A tenant's keys. States are derived from `activatesAt`/`retiredAt` at the instant asked,
/// so a `next` key becomes `active` on time on every instance without a background job:
/// the newest key whose activation time has passed signs; the keys it superseded are retired.
public struct SigningKeyRing: Sendable {
    /// How long a retired key stays in the JWKS (tokens it signed live 15 minutes by default;
    /// a day leaves ample room for longer tenant TTLs and resource-server caches).
    public static let retiredKeyPublication: TimeInterval = 86_400

    public let records: [SigningKeyRecord]

    public init(_ records: [SigningKeyRecord]) {
        self.records = records.sorted { ($0.activatesAt, $0.createdAt) < ($1.activatesAt, $1.createdAt) }
    }

    public func statuses(at now: Date) -> [SigningKeyStatus] {
        let live = records.filter { key in
            key.activatesAt <= now && !(key.retiredAt.map { $0 <= now } ?? false) && !key.isRevoked(at: now)
        }
        var result: [SigningKeyStatus] = []
        for key in records {
            if let revokedAt = key.revokedAt, revokedAt <= now {
                result.append(.init(record: key, state: .revoked, retiredSince: key.retiredAt.map { min($0, revokedAt) } ?? revokedAt))
            } else if let retiredAt = key.retiredAt, retiredAt <= now {
                result.append(.init(record: key, state: .retired, retiredSince: retiredAt))
            } else if key.activatesAt > now {
                result.append(.init(record: key, state: .next, retiredSince: nil))
            } else if key.id == live.last?.id {
                result.append(.init(record: key, state: .active, retiredSince: nil))
            } else {
                let successor = live.first {
                    $0.activatesAt > key.activatesAt || ($0.activatesAt == key.activatesAt && $0.createdAt > key.createdAt)
                }
                result.append(.init(record: key, state: .retired, retiredSince: successor?.activatesAt ?? key.activatesAt))
            }
        }
        return result
    }

    public func active(at now: Date) -> SigningKeyRecord? {
        statuses(at: now).first { $0.state == .active }?.record
    }

    /// Keys a resource server should know: `next`, `active`, and recently retired ones; never
    /// revoked ones.
    public func published(at now: Date) -> [SigningKeyStatus] {
        statuses(at: now).filter { status in
            switch status.state {
            case .next, .active: true
            case .retired: (status.retiredSince ?? .distantPast) > now.addingTimeInterval(-Self.retiredKeyPublication)
            case .revoked: false
            }
        }
    }
}

/// Fresh ES256 key material: the private key (raw scalar), the public point and its kid.
public struct SigningKeyMaterial: Sendable {
    public let privateKey: Data
    public let publicKey: Data
    public let kid: String

    public static func generate() -> SigningKeyMaterial {
        let key = P256.Signing.PrivateKey()
        return SigningKeyMaterial(
            privateKey: key.rawRepresentation,
            publicKey: key.publicKey.x963Representation,
            kid: JWKThumbprint.ec(publicKey: key.publicKey)
        )
    }
}

/// RFC 7638 JWK thumbprints, used as `kid` so a key's id follows from the key itself.
public enum JWKThumbprint {
    public static func ec(publicKey: P256.Signing.PublicKey) -> String {
        let (x, y) = coordinates(of: publicKey)
        // RFC 7638 §3.2: required members only, lexicographic order, no white space.
        let canonical = #"{"crv":"P-256","kty":"EC","x":"\#(x)","y":"\#(y)"}"#
        return Base64URL.encode(Data(SHA256.hash(data: Data(canonical.utf8))))
    }

    /// Base64url X and Y coordinates of a P-256 public key.
    public static func coordinates(of publicKey: P256.Signing.PublicKey) -> (x: String, y: String) {
        let raw = publicKey.rawRepresentation  // X ‖ Y, 32 bytes each
        return (Base64URL.encode(raw.prefix(32)), Base64URL.encode(raw.suffix(32)))
    }
}

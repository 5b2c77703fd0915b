import Crypto
import Foundation
import JWTKit

/// The ES256 JWT Apple takes as `client_secret`: header `kid` = key id; claims `iss` team id,
/// `iat`, `exp`, `aud` https://appleid.apple.com, `sub` client id. Made from the team's `.p8`.
public struct AppleClientSecretFactory: Sendable {
    public let teamID: String
    public let keyID: String
    private let keys: JWTKeyCollection
    /// Secrets are reused until this close to their expiry.
    let lifetime: TimeInterval
    let renewBefore: TimeInterval

    /// `p8PEM`: the PKCS#8 PEM text of the key downloaded from Apple.
    public init(teamID: String, keyID: String, p8PEM: String, lifetime: TimeInterval = 86_400 * 30) async throws {
        let key = try ES256PrivateKey(pem: p8PEM)
        self.teamID = teamID
        self.keyID = keyID
        self.keys = JWTKeyCollection()
        await keys.add(ecdsa: key, kid: JWKIdentifier(string: keyID))
        self.lifetime = min(lifetime, Apple.maxClientSecretLifetime)
        self.renewBefore = min(86_400, lifetime / 2)
    }

    struct Claims: JWTPayload {
        let iss: IssuerClaim
        let iat: IssuedAtClaim
        let exp: ExpirationClaim
        let aud: AudienceClaim
        let sub: SubjectClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    public func make(clientID: String, now: Date = Date()) async throws -> (secret: String, expiresAt: Date) {
        let expiresAt = now.addingTimeInterval(lifetime)
        let claims = Claims(
            iss: .init(value: teamID), iat: .init(value: now), exp: .init(value: expiresAt),
            aud: .init(value: [Apple.issuer]), sub: .init(value: clientID))
        return (try await keys.sign(claims, kid: JWKIdentifier(string: keyID)), expiresAt)
    }
}

/// Caches client secrets per client id and renews them a day before they expire.
public actor AppleClientSecretCache {
    private var cached: [String: (secret: String, expiresAt: Date)] = [:]
    let factory: AppleClientSecretFactory

    public init(factory: AppleClientSecretFactory) { self.factory = factory }

    public func secret(for clientID: String, now: Date = Date()) async throws -> String {
        if let entry = cached[clientID], entry.expiresAt.timeIntervalSince(now) > factory.renewBefore {
            return entry.secret
        }
        let fresh = try await factory.make(clientID: clientID, now: now)
        cached[clientID] = fresh
        return fresh.secret
    }
}

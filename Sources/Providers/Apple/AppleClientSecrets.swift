import BrokerCore
import Crypto
import Foundation

/// Client-secret factories per team key, built from the decrypted `.p8` once and reused
/// (each caches its secrets and renews them before they expire).
public actor AppleClientSecrets {
    let secrets: SecretBox
    private var caches: [String: AppleClientSecretCache] = [:]

    public init(secrets: SecretBox) { self.secrets = secrets }

    /// The client secret for `clientID`; throws ``ProviderFailure/appleKeyMissing(teamID:)``
    /// when the team has no key, and the sealing box's error when the key does not open.
    public func secret(team: AppleTeam, clientID: String) async throws -> String {
        guard let keyID = team.keyID, let sealed = team.sealedPrivateKey else {
            throw ProviderFailure.appleKeyMissing(teamID: team.teamID)
        }
        let cacheKey = "\(team.id):\(keyID):\(Hex.encode(SHA256.hash(data: sealed)))"
        if let cache = caches[cacheKey] { return try await cache.secret(for: clientID) }
        let pem = try secrets.open(
            sealed, context: AppleTeam.sealingContext(tenantID: team.tenantID, teamID: team.teamID), what: "Apple .p8 key")
        let factory = try await AppleClientSecretFactory(
            teamID: team.teamID, keyID: keyID, p8PEM: String(decoding: pem, as: UTF8.self))
        let cache = AppleClientSecretCache(factory: factory)
        caches[cacheKey] = cache
        return try await cache.secret(for: clientID)
    }
}

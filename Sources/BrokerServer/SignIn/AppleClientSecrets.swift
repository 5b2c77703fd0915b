import BrokerCore
import Crypto
import Foundation
import Providers

/// Client-secret factories per team key, built from the decrypted `.p8` once and reused
/// (each caches its secrets and renews them before they expire).
actor AppleClientSecrets {
    let secrets: SecretBox
    private var caches: [String: AppleClientSecretCache] = [:]

    init(secrets: SecretBox) { self.secrets = secrets }

    func secret(team: AppleTeam, clientID: String) async throws -> String {
        guard let keyID = team.keyID, let sealed = team.sealedPrivateKey else {
            throw BrokerError(
                code: "apple_key_missing", kind: .badRequest, title: "No Apple key configured",
                detail: "Team \(team.teamID) has no Sign in with Apple key, so the authorization code cannot be exchanged.",
                hint: "Upload the team's .p8 key: broker apple team set --tenant <slug> --team-id \(team.teamID) --key-id <KEYID> --private-key-file key.p8")
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

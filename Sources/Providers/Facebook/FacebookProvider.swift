import BrokerCore
import Foundation
import Synchronization

/// Facebook Login, both proofs: a classic user access token checked live at Graph
/// (`debug_token`, then `/me` with `appsecret_proof`), or a Limited Login token (an OpenID id
/// token). Both name the same app-scoped user id, so the identity is (facebook, app id, user id)
/// either way. Facebook's email is never taken as verified (decision 0024).
public struct FacebookProvider: IDTokenProvider {
    public typealias Settings = FacebookSettings

    /// The tenant's Facebook app: its id and its secret, opened.
    public struct FacebookSettings: Sendable {
        public var appID: String
        public var appSecret: String
    }

    public let keys: JWKSCache
    let graph: FacebookGraphClient
    let secrets: SecretBox
    /// App secrets opened before, by their sealed bytes: a classic sign-in would otherwise
    /// decrypt the secret each time. A changed secret is new sealed bytes.
    let openedSecrets = OpenedSecrets()

    public init(keys: JWKSCache, graph: FacebookGraphClient, secrets: SecretBox) {
        self.keys = keys
        self.graph = graph
        self.secrets = secrets
    }

    public static func tokenPolicy(_ options: TokenCheckOptions) -> (VerificationPolicy, NonceExpectation) {
        var policy = VerificationPolicy(issuers: [Facebook.issuer], algorithms: ["RS256"], audiences: options.audiences)
        policy.claimChecks = [.authorizedParty(options.authorizedParties ?? options.audiences)]
        return (policy, options.rawNonce.map { NonceExpectation(rawNonce: $0, mode: .raw) } ?? .none)
    }

    public func settings(for proof: ProviderProof, provider: ProviderID, tenantID: UUID, store: any ProviderConfigurationStore)
        async throws -> FacebookSettings
    {
        guard let configuration = try await store.configuration(tenantID: tenantID, provider: .facebook), configuration.enabled,
            let appID = configuration.appID, let sealed = configuration.sealedSecret
        else { throw ProviderFailure.notEnabled(.facebook) }
        // Limited Login is its own switch: a tenant that did not turn it on takes no such token.
        if proof.idToken != nil, !configuration.limitedLogin { throw ProviderFailure.notEnabled(.facebook) }
        if let secret = openedSecrets.secret(for: sealed) { return FacebookSettings(appID: appID, appSecret: secret) }
        let opened = try secrets.open(
            sealed, context: ProviderConfiguration.secretContext(tenantID: tenantID, provider: .facebook, clientID: appID),
            what: "Facebook app secret")
        let secret = String(decoding: opened, as: UTF8.self)
        openedSecrets.remember(secret, for: sealed)
        return FacebookSettings(appID: appID, appSecret: secret)
    }

    public func verify(_ proof: ProviderProof, settings: FacebookSettings, tenantID: UUID, at now: Date)
        async throws(ProviderFailure) -> VerifiedProof
    {
        if let token = proof.idToken {
            return try await verifyLimitedLogin(token, nonce: proof.nonce, settings: settings, tenantID: tenantID, at: now)
        }
        guard let token = proof.accessToken, !token.isEmpty else {
            throw .malformedProof("access_token or limited_login_token is required")
        }
        // Both Graph calls at once (decision 0024): nothing is accepted before every check of
        // both answers holds, and one round trip to Facebook instead of two.
        async let debugged = Self.outcome { () async throws(ProviderFailure) in
            try await graph.debugToken(token, appID: settings.appID, appSecret: settings.appSecret)
        }
        async let described = Self.outcome { () async throws(ProviderFailure) in try await graph.me(token, appSecret: settings.appSecret) }
        // An early refusal leaves `described` unawaited: it is cancelled when this scope ends.
        let info = try await debugged.get()
        guard info.isValid else { throw Self.invalid("Facebook says the access token is not valid (expired, revoked or unknown).") }
        guard info.appID == settings.appID else { throw Self.invalid("The access token was issued to another Facebook app.") }
        if let expiresAt = info.expiresAt, expiresAt != 0, Date(timeIntervalSince1970: TimeInterval(expiresAt)) <= now {
            throw Self.invalid("The access token has expired.")
        }
        guard let userID = info.userID else { throw Self.invalid("Facebook names no user for the access token.") }
        let person = try await described.get()
        guard person.id == userID else { throw Self.invalid("Facebook's /me names another user than the access token.") }
        var attributes: [String: String] = [:]
        if let name = person.name, !name.isEmpty { attributes["name"] = String(name.prefix(200)) }
        let identity = ProviderIdentity(
            provider: .facebook, providerScope: settings.appID, subject: userID, email: person.email,
            emailVerified: false, isPrivateEmail: false, name: PersonName(givenName: nil, familyName: nil), attributes: attributes,
            emailTrust: .never)
        // A classic access token is a bearer credential meant for many calls; Facebook checks it
        // live on every use, so it has no replay key.
        return VerifiedProof(identity: identity, clientID: settings.appID, replayKey: nil, issuedAt: now)
    }

    private func verifyLimitedLogin(_ token: String, nonce: String?, settings: FacebookSettings, tenantID: UUID, at now: Date)
        async throws(ProviderFailure) -> VerifiedProof
    {
        guard let nonce, !nonce.isEmpty else { throw .malformedProof("member 'nonce' is required with 'limited_login_token'") }
        let claims = try await verifyToken(
            token, provider: .facebook, options: TokenCheckOptions(audiences: [settings.appID], rawNonce: nonce), at: now)
        var attributes: [String: String] = [:]
        if let name = claims.payload["name"]?.string, !name.isEmpty { attributes["name"] = String(name.prefix(200)) }
        let identity = ProviderIdentity(
            provider: .facebook, providerScope: settings.appID, subject: claims.subject, email: claims.email,
            emailVerified: false, isPrivateEmail: false, name: claims.name, attributes: attributes, emailTrust: .never)
        return VerifiedProof(identity: identity, clientID: settings.appID, claims: claims, token: token, tenantID: tenantID)
    }

    /// A Graph call's answer or failure, for running two calls at once with their typed errors.
    static func outcome<T: Sendable>(_ call: () async throws(ProviderFailure) -> T) async -> Result<T, ProviderFailure> {
        do { return .success(try await call()) } catch { return .failure(error) }
    }

    static func invalid(_ detail: String) -> ProviderFailure { .rejected(.init("invalid_token", detail)) }
}

/// Opened app secrets by sealed value, at most 1,000 (then forgotten and opened again).
final class OpenedSecrets: Sendable {
    private let secrets = Mutex<[Data: String]>([:])

    func secret(for sealed: Data) -> String? { secrets.withLock { $0[sealed] } }

    func remember(_ secret: String, for sealed: Data) {
        secrets.withLock { secrets in
            if secrets.count >= 1_000 { secrets.removeAll() }
            secrets[sealed] = secret
        }
    }
}

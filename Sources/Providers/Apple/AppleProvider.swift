import AsyncHTTPClient
import BrokerCore
import Foundation
import Logging

/// Sign in with Apple (decisions 0006 and 0019): identity tokens
/// for a client of the tenant's app groups, `sub` scoped to the team; the authorization code is
/// exchanged for Apple's refresh token, which is kept sealed and revoked when not kept.
public struct AppleProvider: IDTokenProvider, AuthorizationCodeExchanging, TokenRevoking, ServerNotifying {
    public typealias Settings = ResolvedAppleClient

    /// Apple vouches for the emails it marks verified; relay addresses never join accounts.
    static let descriptorEmailTrust = EmailTrust.verified

    public let keys: JWKSCache
    let tokenClient: AppleTokenClient
    let clientSecrets: AppleClientSecrets
    let secrets: SecretBox
    let logger: Logger
    /// Apple's base URL (`BROKER_APPLE_BASE_URL`): the web flow's authorize URL is under it.
    let baseURL: String
    /// Where Apple posts the web flow's answer unless the Services ID registered a redirect URI.
    let callbackURL: String

    /// `timeout` bounds each call to Apple's token and revoke endpoints (`BROKER_PROVIDER_TIMEOUT`).
    public init(
        baseURL: String, keys: JWKSCache, secrets: SecretBox, httpClient: HTTPClient = .providers, timeout: Duration = .seconds(10),
        callbackURL: String = ProviderEndpoints().appleCallbackURL, logger: Logger
    ) {
        self.baseURL = baseURL
        self.callbackURL = callbackURL
        self.keys = keys
        self.tokenClient = AppleTokenClient(baseURL: baseURL, httpClient: httpClient, timeout: timeout)
        self.clientSecrets = AppleClientSecrets(secrets: secrets)
        self.secrets = secrets
        self.logger = logger
    }

    public static func tokenPolicy(_ options: TokenCheckOptions) -> (VerificationPolicy, NonceExpectation) {
        var policy = VerificationPolicy(issuers: [Apple.issuer], algorithms: ["RS256"], audiences: options.audiences)
        policy.claimChecks = [.authorizedParty(options.authorizedParties ?? options.audiences)]
        return (policy, options.rawNonce.map { NonceExpectation(rawNonce: $0, mode: options.nonceMode) } ?? .none)
    }

    public func settings(for proof: ProviderProof, provider: ProviderID, tenantID: UUID, store: any ProviderConfigurationStore)
        async throws -> ResolvedAppleClient
    {
        let clientID = proof.clientID ?? ""
        guard let resolved = try await store.appleClient(tenantID: tenantID, clientID: clientID) else {
            throw ProviderFailure.unknownClient(.apple, clientID: clientID)
        }
        // Apple's row exists only once an operator turned it off (`broker provider disable apple`).
        if let switched = try await store.configuration(tenantID: tenantID, provider: .apple), !switched.enabled {
            throw ProviderFailure.notEnabled(.apple)
        }
        return resolved
    }

    public func verify(_ proof: ProviderProof, settings resolved: ResolvedAppleClient, tenantID: UUID, at now: Date)
        async throws(ProviderFailure) -> VerifiedProof
    {
        guard let token = proof.idToken else { throw .malformedProof("identity_token is required") }
        let client = resolved.client
        if client.nonceRequired, (proof.nonce ?? "").isEmpty { throw .nonceRequired(clientID: client.clientID) }
        let claims = try await verifyToken(
            token, provider: .apple,
            options: TokenCheckOptions(audiences: [client.clientID], rawNonce: proof.nonce, nonceMode: client.nonceMode),
            at: now)
        let identity = ProviderIdentity(
            provider: .apple, providerScope: resolved.team.teamID, subject: claims.subject, email: claims.email,
            emailVerified: claims.emailVerified ?? false,
            isPrivateEmail: (claims.isPrivateEmail ?? false) || ProviderIdentity.isAppleRelay(claims.email),
            name: proof.name,
            realUserStatus: claims.realUserStatus, emailTrust: AppleProvider.descriptorEmailTrust)
        return VerifiedProof(identity: identity, clientID: client.clientID, claims: claims, token: token, tenantID: tenantID)
    }

    /// Exchanges the code at Apple (client id = the posted client) and returns Apple's refresh
    /// token when it is proven to be this user's: the id token Apple returns with it must
    /// verify and name the same `sub`. A refresh token that is not proven is revoked at Apple,
    /// never kept; one that belongs to another user fails the sign-in.
    public func exchange(code: String, subject: String, settings resolved: ResolvedAppleClient, tenantID: UUID, at now: Date)
        async throws -> KeptProviderToken?
    {
        try await redeem(code: code, subject: subject, resolved: resolved, redirectURI: nil, strict: false, at: now)
    }

    /// Redeems `code` at Apple's token endpoint. `strict` (the web flow): Apple's answer must
    /// carry an id token that verifies and names `subject`, else the sign-in fails
    /// (``ProviderFailure/unreadableAnswer(_:_:)``, ``ProviderFailure/rejected(_:)``,
    /// ``ProviderFailure/subjectMismatch``); not strict (a native sign-in, whose identity token
    /// the app posted): an answer without one only keeps no refresh token.
    func redeem(code: String, subject: String, resolved: ResolvedAppleClient, redirectURI: String?, strict: Bool, at now: Date)
        async throws -> KeptProviderToken?
    {
        let clientID = resolved.client.clientID
        let secret = try await clientSecrets.secret(team: resolved.team, clientID: clientID)
        let answer = try await tokenClient.exchange(code: code, clientID: clientID, clientSecret: secret, redirectURI: redirectURI)
        let refreshToken = answer.refreshToken.flatMap { $0.isEmpty ? nil : $0 }
        guard let idToken = answer.idToken else {
            if let refreshToken { revoke(refreshToken, resolved: resolved, reason: "Apple's answer carried no id_token") }
            if strict { throw ProviderFailure.unreadableAnswer(.apple, .tokenEndpoint) }
            return nil
        }
        let codeSubject: String
        do {
            // The token comes from Apple's token endpoint over TLS: no nonce to compare.
            let (verifier, _) = verifier(TokenCheckOptions(audiences: [clientID]))
            codeSubject = try await verifier.verify(idToken, nonce: .notChecked, at: now).subject
        } catch {
            if let refreshToken { revoke(refreshToken, resolved: resolved, reason: "Apple's id_token did not verify") }
            if strict { throw ProviderFailure.rejected(error) }
            return nil
        }
        guard codeSubject == subject else {
            if let refreshToken { revoke(refreshToken, resolved: resolved, reason: "the code belongs to another user") }
            throw ProviderFailure.subjectMismatch
        }
        guard let refreshToken else { return nil }
        do {
            let sealed = try secrets.seal(
                Data(refreshToken.utf8),
                context: Self.refreshTokenSealingContext(tenantID: resolved.team.tenantID, teamID: resolved.team.teamID, subject: subject))
            return KeptProviderToken(raw: refreshToken, sealed: sealed)
        } catch {
            revoke(refreshToken, resolved: resolved, reason: "it could not be sealed")
            throw error
        }
    }

    /// The context Apple's refresh token is sealed under (`identities.provider_refresh_token_sealed`):
    /// a sealed token moved to another tenant, team or person does not open.
    public static func refreshTokenSealingContext(tenantID: UUID, teamID: String, subject: String) -> String {
        "apple_refresh:\(tenantID.lowercasedString):\(teamID):\(subject)"
    }

    public func revokeLater(_ token: KeptProviderToken, settings resolved: ResolvedAppleClient, reason: String) {
        revoke(token.raw, resolved: resolved, reason: reason)
    }

    /// Revokes at Apple in the background (the answer to the client does not wait for Apple);
    /// a failure is logged, without the token.
    func revoke(_ refreshToken: String, resolved: ResolvedAppleClient, reason: String) {
        let (logger, tokenClient, clientSecrets) = (logger, tokenClient, clientSecrets)
        let (team, clientID) = (resolved.team, resolved.client.clientID)
        Task {
            do {
                let secret = try await clientSecrets.secret(team: team, clientID: clientID)
                try await tokenClient.revoke(refreshToken: refreshToken, clientID: clientID, clientSecret: secret)
                logger.notice(
                    "revoked an Apple refresh token the broker does not keep",
                    metadata: ["reason": "\(reason)", "client_id": "\(clientID)"])
            } catch {
                logger.warning(
                    "could not revoke an Apple refresh token the broker does not keep",
                    metadata: ["reason": "\(reason)", "client_id": "\(clientID)", "error": "\(error)"])
            }
        }
    }
}

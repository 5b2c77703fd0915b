import BrokerCore
import Foundation

/// Sign in with Apple on the web (issue 22 §2): a Services ID, Apple's authorize page, Apple's
/// `form_post` of `code`, `id_token`, `state` and (first time) `user` to the redirect URI, and
/// the code exchanged at `/auth/token` with the Services ID, the same redirect URI and the
/// team's client secret. Apple's `sub` is team-scoped: the same person through an App ID and a
/// Services ID of one team is one identity.
extension AppleProvider: WebAuthorizing {
    public func webClient(clientID: String?, provider: ProviderID, tenantID: UUID, store: any ProviderConfigurationStore)
        async throws -> WebClient
    {
        if let switched = try await store.configuration(tenantID: tenantID, provider: .apple), !switched.enabled {
            throw ProviderFailure.notEnabled(.apple)
        }
        let chosen: String
        if let clientID {
            chosen = clientID
        } else {
            // The Services IDs with a return URL of the REST web flow's; when none has one, every
            // Services ID is a candidate (a relying party of the tenant's OpenID Provider, which
            // sends the person to its own redirect URI, takes the first).
            let all = try await store.appleServiceClients(tenantID: tenantID)
            let services = all.filter { !$0.returnURLs.isEmpty }
            guard let only = services.first else {
                guard !all.isEmpty else { throw WebClientFailure.notSupported(.apple) }
                throw WebClientFailure.unknownClient(.apple, clientID: nil, candidates: all.map(\.clientID))
            }
            guard services.count == 1 else {
                throw WebClientFailure.unknownClient(.apple, clientID: nil, candidates: services.map(\.clientID))
            }
            chosen = only.clientID
        }
        guard let resolved = try await store.appleClient(tenantID: tenantID, clientID: chosen), resolved.client.kind == .service else {
            throw WebClientFailure.unknownClient(.apple, clientID: chosen, candidates: [])
        }
        let redirectURI = resolved.client.redirectURIs.first ?? callbackURL
        let authorizeBase = Apple.authorizeURL(base: baseURL)
        return WebClient(
            provider: .apple, clientID: chosen, redirectURI: redirectURI, returnURLs: resolved.client.returnURLs,
            providerScope: resolved.team.teamID,
            authorizationURL: { request in
                Self.url(
                    authorizeBase,
                    [
                        ("client_id", chosen), ("redirect_uri", redirectURI), ("response_type", "code id_token"),
                        ("response_mode", "form_post"), ("scope", "name email"), ("state", request.state), ("nonce", request.nonce),
                    ])
            },
            complete: { response, request, tenantID, beforeRedeeming, now in
                try await completeWeb(
                    response, request: request, resolved: resolved, redirectURI: redirectURI, tenantID: tenantID,
                    beforeRedeeming: beforeRedeeming, at: now)
            },
            revokeLater: { token, reason in revokeLater(token, settings: resolved, reason: reason) })
    }

    /// Verifies the posted id token (audience the Services ID, the stored nonce raw, `c_hash`
    /// of the posted code when present), lets the caller refuse before the code is redeemed,
    /// redeems it, and requires Apple's exchanged id token to name the same `sub`.
    func completeWeb(
        _ response: AuthorizationResponse, request: AuthorizationRequest, resolved: ResolvedAppleClient, redirectURI: String,
        tenantID: UUID, beforeRedeeming: @Sendable (ProviderIdentity) async throws -> Void, at now: Date
    ) async throws -> WebVerification {
        guard let token = response.idToken, !token.isEmpty, let code = response.code, !code.isEmpty else {
            throw ProviderFailure.malformedProof("Apple's answer carries no code and id_token")
        }
        let clientID = resolved.client.clientID
        let claims = try await verifyToken(
            token, provider: .apple, options: TokenCheckOptions(audiences: [clientID], rawNonce: request.nonce, nonceMode: .raw), at: now)
        if let cHash = claims.payload["c_hash"] {
            guard cHash.string == HalfHash.sha256(code) else {
                throw ProviderFailure.rejected(TokenVerificationError("c_hash_mismatch", "The id token's c_hash does not match the code."))
            }
        }
        let identity = ProviderIdentity(
            provider: .apple, providerScope: resolved.team.teamID, subject: claims.subject, email: claims.email,
            emailVerified: claims.emailVerified ?? false,
            isPrivateEmail: (claims.isPrivateEmail ?? false) || ProviderIdentity.isAppleRelay(claims.email),
            name: Self.nameHint(response.user), realUserStatus: claims.realUserStatus, emailTrust: AppleProvider.descriptorEmailTrust)
        try await beforeRedeeming(identity)
        let kept = try await redeem(
            code: code, subject: claims.subject, resolved: resolved, redirectURI: redirectURI, strict: true, at: now)
        let verified = VerifiedProof(identity: identity, clientID: clientID, claims: claims, token: token, tenantID: tenantID)
        return WebVerification(verified: verified, kept: kept) { token, reason in revokeLater(token, settings: resolved, reason: reason) }
    }

    /// The name in Apple's unsigned `user` field (`{"name": {"firstName", "lastName"}, "email"}`,
    /// first authorization only): a display hint. Its email is never read; the token's is used.
    static func nameHint(_ user: String?) -> PersonName {
        guard let user, user.utf8.count <= 4_096, let object = (try? JSONValue.parse(Array(user.utf8), maxDepth: 4))?.object,
            let name = object["name"]?.object
        else { return PersonName(givenName: nil, familyName: nil) }
        return PersonName(givenName: name["firstName"]?.string(maxBytes: 256), familyName: name["lastName"]?.string(maxBytes: 256))
    }
}

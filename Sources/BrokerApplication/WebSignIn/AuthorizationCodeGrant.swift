import BrokerCore
import Foundation

/// What a relying party's authorization code stands for (decision 0085): the person signed in
/// at the provider's callback, so the code names the session that opened and keeps, sealed, what
/// the token endpoint needs to answer it without reading anything again: what the client asked
/// (to check the redirect URI and the PKCE verifier against), the account, and the claims its
/// ID token shows for the scope granted. Its tokens are not in it: the access and ID tokens are
/// signed at the token endpoint, and the refresh token is derived again from the code.
struct AuthorizationCodeGrant: Sendable, Equatable {
    var relyingParty: RelyingParty
    var accountID: UUID
    var sessionID: UUID
    /// The provider the person signed in with (the tokens' `idp`).
    var idp: String
    var claims: ScopedClaims

    /// The relying party that asked for the sign-in (decision 0082), to redeem the code against
    /// what it asked.
    struct RelyingParty: Sendable, Equatable {
        var clientID: String
        var redirectURI: String
        var request: KeptClientRequest
        /// When the provider's callback vouched for the person (the ID token's `auth_time`).
        var authTime: Date

        var json: JSONValue {
            .object([
                "client_id": .string(clientID), "redirect_uri": .string(redirectURI), "request": .string(request.json),
                "auth_time": .number(authTime.timeIntervalSince1970),
            ])
        }

        init(clientID: String, redirectURI: String, request: KeptClientRequest, authTime: Date) {
            self.clientID = clientID
            self.redirectURI = redirectURI
            self.request = request
            self.authTime = authTime
        }

        init?(json: JSONValue?) {
            guard let object = json?.object, let clientID = object["client_id"]?.string,
                let redirectURI = object["redirect_uri"]?.string,
                let request = object["request"]?.string.flatMap(KeptClientRequest.init(json:)),
                let authTime = object["auth_time"]?.number
            else { return nil }
            self.init(clientID: clientID, redirectURI: redirectURI, request: request, authTime: Date(timeIntervalSince1970: authTime))
        }
    }

    var json: [UInt8] {
        var claimed: [String: JSONValue] = [:]
        claimed["email"] = claims.email.map(JSONValue.string)
        claimed["email_verified"] = claims.emailVerified.map(JSONValue.bool)
        claimed["name"] = claims.name.map(JSONValue.string)
        claimed["given_name"] = claims.givenName.map(JSONValue.string)
        claimed["family_name"] = claims.familyName.map(JSONValue.string)
        var writer = JSONWriter(capacity: 512)
        writer.value(
            .object([
                "relying_party": relyingParty.json, "account_id": .string(accountID.lowercasedString),
                "session_id": .string(sessionID.lowercasedString), "idp": .string(idp), "claims": .object(claimed),
            ]))
        return writer.bytes
    }

    init(relyingParty: RelyingParty, accountID: UUID, sessionID: UUID, idp: String, claims: ScopedClaims) {
        self.relyingParty = relyingParty
        self.accountID = accountID
        self.sessionID = sessionID
        self.idp = idp
        self.claims = claims
    }

    /// Reads what ``json`` wrote; nil for anything else (a web sign-in's grant among them).
    init?(json bytes: some Collection<UInt8>) {
        guard let object = (try? JSONValue.parse(bytes, maxDepth: 3))?.object,
            let relyingParty = RelyingParty(json: object["relying_party"]),
            let accountID = object["account_id"]?.string.flatMap(UUID.init(uuidString:)),
            let sessionID = object["session_id"]?.string.flatMap(UUID.init(uuidString:)), let idp = object["idp"]?.string,
            let claimed = object["claims"]?.object
        else { return nil }
        var claims = ScopedClaims()
        claims.email = claimed["email"]?.string
        if case .bool(let verified)? = claimed["email_verified"] { claims.emailVerified = verified }
        claims.name = claimed["name"]?.string
        claims.givenName = claimed["given_name"]?.string
        claims.familyName = claimed["family_name"]?.string
        self.init(relyingParty: relyingParty, accountID: accountID, sessionID: sessionID, idp: idp, claims: claims)
    }

    /// The sealing context of a code's grant: it opens only for its tenant, and never as a web
    /// sign-in's grant.
    static func sealingContext(tenantID: UUID) -> String {
        "authorization_code_grant:\(tenantID.lowercasedString)"
    }
}

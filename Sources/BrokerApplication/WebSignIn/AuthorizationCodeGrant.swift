import BrokerCore
import Foundation

/// What a relying party's authorization code stands for (decision 0085): the person signed in
/// at the provider's callback, so the code names the session that opened and keeps, sealed, what
/// the token endpoint needs to check and answer it: what the client asked (to check the redirect
/// URI and the PKCE verifier against), the session and the upstream provider. It is sealed before
/// the sign-in, which keeps it in its own commit (decision 0100), so the account and its claims
/// are not in it: the redemption reads them from the session's account. A grant an earlier
/// version sealed also holds `account_id` and `claims`; they are not read. Its tokens are not in
/// it either: the access and ID tokens are signed at the token endpoint, and the refresh token is
/// derived again from the code.
struct AuthorizationCodeGrant: Sendable, Equatable {
    var relyingParty: RelyingParty
    var sessionID: UUID
    /// The provider the person signed in with (the tokens' `idp`).
    var idp: String

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
        var writer = JSONWriter(capacity: 512)
        writer.value(
            .object([
                "relying_party": relyingParty.json, "session_id": .string(sessionID.lowercasedString), "idp": .string(idp),
            ]))
        return writer.bytes
    }

    init(relyingParty: RelyingParty, sessionID: UUID, idp: String) {
        self.relyingParty = relyingParty
        self.sessionID = sessionID
        self.idp = idp
    }

    /// Reads what ``json`` wrote (and what an earlier version wrote, its account and claims left
    /// unread); nil for anything else (a web sign-in's grant among them).
    init?(json bytes: some Collection<UInt8>) {
        guard let object = (try? JSONValue.parse(bytes, maxDepth: 3))?.object,
            let relyingParty = RelyingParty(json: object["relying_party"]),
            let sessionID = object["session_id"]?.string.flatMap(UUID.init(uuidString:)), let idp = object["idp"]?.string
        else { return nil }
        self.init(relyingParty: relyingParty, sessionID: sessionID, idp: idp)
    }

    /// The sealing context of a code's grant: it opens only for its tenant, and never as a web
    /// sign-in's grant.
    static func sealingContext(tenantID: UUID) -> String {
        "authorization_code_grant:\(tenantID.lowercasedString)"
    }
}

import Crypto
import Foundation
import JWTKit
import Synchronization

/// An Apple-shaped identity provider for tests, the demo and benchmarks: a JWKS at
/// `/auth/keys`, a token endpoint at `/auth/token`, `/auth/revoke`, key rotation, identity
/// tokens with any claims (also wrong ones), and authorization codes bound to a client and a
/// subject. Serve it with ``MockIdPServer``; never point a production broker at it.
public final class MockAppleIdP: MockTokenIssuer {
    public static let issuer = "https://appleid.apple.com"

    struct State {
        var codes: [String: IssuedCode] = [:]
        var refreshTokens: [String: IssuedCode] = [:]
        var revokedTokens: [String] = []
        var revocations: [Revocation] = []
        /// Team id → the P-256 public key (PEM) client secrets of that team must verify with.
        var teams: [String: (keyID: String, publicKey: P256.Signing.PublicKey)] = [:]
        /// Client secrets that verified: their client and expiry (emptied when a team's key changes).
        var verifiedSecrets: [String: (clientID: String, expiresAt: Double)] = [:]
        /// The web flow's authorize page: who consents, its fault, and (client, subject) pairs
        /// that authorized before (Apple sends `user` the first time only).
        var webUser = WebUser(
            subject: "000123.web0user0000000000000000000.0001", email: "web.user@example.com", givenName: "Web", familyName: "User")
        var authorizeFault = AuthorizeFault.none
        var authorizedOnce: Set<String> = []
        /// Each consent on the authorize page is a new person (a benchmark's every sign-in new).
        var webNewPersonEachTime = false
        /// Each consent on the authorize page is the next of this many people in turn (0: off):
        /// the first round new people, the next rounds the same people again.
        var webPeople = 0
        var webConsents = 0
        /// Team transfer: `user.migration` access tokens → their team; `transfer_sub` → the
        /// person it was made for; the status `/auth/usermigrationinfo` answers when set.
        var migrationTokens: [String: String] = [:]
        var transfers: [String: Transfer] = [:]
        var migrationFault: Int?
        var migrationCalls = 0
    }

    struct IssuedCode {
        let clientID: String
        let subject: String
        let claims: [String: JWTHeaderField]
        let issuedAt: Date
        var used = false
        /// The id token the token endpoint answers for this code, minted when the code was
        /// issued (the web flow's authorize page), so a benchmark's callback phase does not
        /// carry the mock's RSA signing; nil: minted at the exchange.
        var idToken: String? = nil
    }

    let state = Mutex(State())
    let faults = Mutex(MockFaults())
    let holds = Mutex(MockHolds())
    /// Signing keys, the published set, `/auth/keys` faults.
    public let keys: MockKeyRing

    public init() throws {
        keys = try MockKeyRing()
    }

    /// A mock whose signing key lives in `keyFile` (PEM; created when missing), so a
    /// `mock-idp serve` and a `mock-idp mint` started separately sign with the same key.
    public init(keyFile: URL) throws {
        keys = try MockKeyRing(keyFile: keyFile, kid: "mock-file")
    }

    /// Registers a team's key so client secrets are checked like Apple does.
    public func registerTeam(_ teamID: String, keyID: String, publicKey: P256.Signing.PublicKey) {
        state.withLock {
            $0.teams[teamID] = (keyID, publicKey)
            $0.verifiedSecrets.removeAll()
        }
    }

    /// Apple-shaped claims for an identity token.
    public func claims(
        subject: String, audience: String, nonce: String? = nil, email: String? = nil, emailVerified: Bool = true,
        isPrivateEmail: Bool = false, issuedAt: Date = Date(), lifetime: TimeInterval = 600,
        extra: [String: JWTHeaderField] = [:]
    ) -> [String: JWTHeaderField] {
        var claims: [String: JWTHeaderField] = [
            "iss": .string(Self.issuer), "sub": .string(subject), "aud": .string(audience),
            "iat": .int(Int(issuedAt.timeIntervalSince1970)), "exp": .int(Int(issuedAt.timeIntervalSince1970 + lifetime)),
            "auth_time": .int(Int(issuedAt.timeIntervalSince1970)), "nonce_supported": .bool(true),
            "real_user_status": .int(2),
            // Apple's at_hash differs per token; random here, so that two tokens minted for one
            // person in one second differ as real ones do (the broker accepts each token once).
            "at_hash": .string(UUID().uuidString),
        ]
        if let nonce { claims["nonce"] = .string(nonce) }
        if let email {
            claims["email"] = .string(email)
            claims["email_verified"] = .bool(emailVerified)
            claims["is_private_email"] = .bool(isPrivateEmail)
        }
        return claims.merging(extra) { $1 }
    }

    /// Apple-shaped claims of a server-to-server notification: `aud` the primary App ID, a fresh
    /// `jti` unless given, and `events` a JSON string with `type`, `sub` and `event_time` in
    /// milliseconds (plus `email` and `is_private_email` for the email events, as Apple sends).
    public func notificationClaims(
        audience: String, type: String, subject: String, eventTime: Date = Date(), jti: String? = nil, issuedAt: Date = Date(),
        lifetime: TimeInterval = 600, email: String? = nil
    ) throws -> [String: JWTHeaderField] {
        var events: [String: Any] = ["type": type, "sub": subject, "event_time": Int64(eventTime.timeIntervalSince1970 * 1_000)]
        if type.hasPrefix("email-") {
            events["email"] = email ?? "\(subject.prefix(8))@privaterelay.appleid.com"
            events["is_private_email"] = "true"
        }
        let eventsText = String(decoding: try JSONSerialization.data(withJSONObject: events, options: [.sortedKeys]), as: UTF8.self)
        return [
            "iss": .string(Self.issuer), "aud": .string(audience), "iat": .int(Int(issuedAt.timeIntervalSince1970)),
            "exp": .int(Int(issuedAt.timeIntervalSince1970 + lifetime)), "jti": .string(jti ?? UUID().uuidString.lowercased()),
            "events": .string(eventsText),
        ]
    }

    /// A signed notification as Apple posts it: the JSON body `{"payload": "<JWS>"}`.
    public func notificationBody(
        audience: String, type: String, subject: String, eventTime: Date = Date(), jti: String? = nil, forgery: TokenForgery = .valid
    ) throws -> Data {
        let payload = try mint(
            notificationClaims(audience: audience, type: type, subject: subject, eventTime: eventTime, jti: jti), forgery: forgery)
        return try JSONSerialization.data(withJSONObject: ["payload": payload])
    }

    /// Issues an authorization code bound to a client id and subject, as Apple does after the
    /// user consents; `/auth/token` exchanges it once, within five minutes.
    public func issueCode(clientID: String, subject: String, extraClaims: [String: JWTHeaderField] = [:]) -> String {
        let code = "c" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        state.withLock {
            $0.codes[code] = IssuedCode(clientID: clientID, subject: subject, claims: extraClaims, issuedAt: Date())
        }
        return code
    }

    /// Tokens revoked through /auth/revoke.
    public var revokedTokens: [String] { state.withLock { $0.revokedTokens } }

    /// A call to `/auth/revoke` that Apple took (a verified client secret).
    public struct Revocation: Sendable, Equatable {
        public let token: String
        public let clientID: String
        public let tokenTypeHint: String?

        public init(token: String, clientID: String, tokenTypeHint: String?) {
            self.token = token
            self.clientID = clientID
            self.tokenTypeHint = tokenTypeHint
        }
    }

    /// The revocations Apple took, in order.
    public var revocations: [Revocation] { state.withLock { $0.revocations } }

    /// Refresh tokens issued at `/auth/token`, for `clientID` (newest last).
    public func issuedRefreshTokens(clientID: String) -> [String] {
        state.withLock { state in state.refreshTokens.filter { $0.value.clientID == clientID }.map(\.key).sorted() }
    }

    static func json(_ fields: [String: JWTHeaderField]) throws -> Data {
        try MockKeyRing.json(fields)
    }
}

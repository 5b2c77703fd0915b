import Crypto
import Foundation
import JWTKit
import Synchronization

/// Apple's token and revoke endpoints, as the mock answers them.
extension MockAppleIdP {
    public struct TokenRequest: Sendable {
        public var grant_type: String?
        public var code: String?
        public var refresh_token: String?
        public var client_id: String?
        public var client_secret: String?
        public var redirect_uri: String?
        public var scope: String?

        /// The request of a form's fields.
        init(form: [String: String]) {
            grant_type = form["grant_type"]
            code = form["code"]
            refresh_token = form["refresh_token"]
            client_id = form["client_id"]
            client_secret = form["client_secret"]
            redirect_uri = form["redirect_uri"]
            scope = form["scope"]
        }
    }

    public enum TokenAnswer: Sendable {
        /// 200 with this JSON body.
        case success(Data)
        case error(status: Int, code: String)
    }

    public func answer(_ request: TokenRequest, now: Date = Date()) -> TokenAnswer {
        guard let clientID = request.client_id, !clientID.isEmpty,
            let secret = request.client_secret, checkClientSecret(secret, clientID: clientID, now: now)
        else { return .error(status: 400, code: "invalid_client") }

        switch request.grant_type {
        case "authorization_code":
            countCodeExchange()
            guard let code = request.code else { return .error(status: 400, code: "invalid_request") }
            let issued: IssuedCode? = state.withLock { state in
                guard var entry = state.codes[code], !entry.used, entry.clientID == clientID,
                    now.timeIntervalSince(entry.issuedAt) < 300
                else { return nil }
                entry.used = true
                state.codes[code] = entry
                return entry
            }
            guard let issued else { return .error(status: 400, code: "invalid_grant") }
            let refreshToken = "r" + UUID().uuidString.lowercased().filter { $0 != "-" }
            state.withLock { $0.refreshTokens[refreshToken] = issued }
            return tokens(for: issued, refreshToken: refreshToken, now: now)
        case "refresh_token":
            guard let token = request.refresh_token,
                let issued = state.withLock({ $0.revokedTokens.contains(token) ? nil : $0.refreshTokens[token] }),
                issued.clientID == clientID
            else { return .error(status: 400, code: "invalid_grant") }
            // Refresh grants do not return a new refresh token.
            return tokens(for: issued, refreshToken: nil, now: now)
        case "client_credentials":
            return migrationToken(request, clientID: clientID)
        default:
            return .error(status: 400, code: "unsupported_grant_type")
        }
    }

    /// `/auth/revoke`: 200 with an empty body.
    public func revoke(token: String) {
        state.withLock { $0.revokedTokens.append(token) }
    }

    /// `/auth/revoke` as Apple answers it: the status of the fault set with ``revokeFault``;
    /// else 400 `invalid_client` unless the client secret verifies for `client_id`; else the
    /// token is recorded (``revocations``) and the answer is 200, also for a token Apple never
    /// issued (as Apple does).
    public func revokeAnswer(_ form: [String: String], now: Date = Date()) -> (status: Int, error: String?) {
        faults.withLock { $0.revokeCalls += 1 }
        if let status = revokeFault { return (status, status < 500 ? "invalid_request" : nil) }
        guard let clientID = form["client_id"], let secret = form["client_secret"], checkClientSecret(secret, clientID: clientID, now: now)
        else { return (400, "invalid_client") }
        guard let token = form["token"], !token.isEmpty else { return (400, "invalid_request") }
        state.withLock {
            $0.revokedTokens.append(token)
            $0.revocations.append(Revocation(token: token, clientID: clientID, tokenTypeHint: form["token_type_hint"]))
        }
        return (200, nil)
    }

    private func tokens(for issued: IssuedCode, refreshToken: String?, now: Date) -> TokenAnswer {
        do {
            let fault = tokenFault
            let subject = fault == .otherSubject ? "other." + issued.subject : issued.subject
            let idToken =
                fault == .none && issued.idToken != nil
                ? issued.idToken ?? "" : try mint(claims(subject: subject, audience: issued.clientID, issuedAt: now, extra: issued.claims))
            var body: [(String, MockJSON.Value)] = [
                ("access_token", .string("a" + UUID().uuidString.lowercased())), ("token_type", .string("Bearer")),
                ("expires_in", .int(3600)),
            ]
            if fault != .omitIDToken { body.append(("id_token", .string(idToken))) }
            if let refreshToken { body.append(("refresh_token", .string(refreshToken))) }
            return .success(MockJSON.object(body))
        } catch {
            return .error(status: 500, code: "server_error")
        }
    }

    /// Apple's rules for client secrets: ES256, `kid` the team's key id, `iss` the team,
    /// `sub` the client id, `aud` https://appleid.apple.com, `exp` in the future and at most
    /// six months after `iat`; the signature verifies when the team is registered.
    func checkClientSecret(_ secret: String, clientID: String, now: Date) -> Bool {
        // A secret that verified is taken until it expires, as long as no team key changes.
        if let verified = state.withLock({ $0.verifiedSecrets[secret] }) {
            return verified.clientID == clientID && verified.expiresAt > now.timeIntervalSince1970
        }
        let parts = secret.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = decode(parts[0]), let payloadData = decode(parts[1]),
            let signature = decode(parts[2]),
            let header = try? JSONSerialization.jsonObject(with: headerData) as? [String: Any],
            let payload = try? JSONSerialization.jsonObject(with: payloadData) as? [String: Any],
            header["alg"] as? String == "ES256", let kid = header["kid"] as? String,
            let iss = payload["iss"] as? String, payload["sub"] as? String == clientID,
            Self.audiences(payload["aud"]).contains(Self.issuer),
            let iat = (payload["iat"] as? NSNumber)?.doubleValue, let exp = (payload["exp"] as? NSNumber)?.doubleValue,
            exp > now.timeIntervalSince1970, exp - iat <= 15_777_000
        else { return false }
        if let team = state.withLock({ $0.teams[iss] }) {
            guard team.keyID == kid, let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: signature),
                team.publicKey.isValidSignature(ecdsa, for: Data("\(parts[0]).\(parts[1])".utf8))
            else { return false }
        }
        state.withLock { state in
            if state.verifiedSecrets.count >= 1_024 { state.verifiedSecrets.removeAll() }
            state.verifiedSecrets[secret] = (clientID, exp)
        }
        return true
    }

    private static func audiences(_ value: Any?) -> [String] {
        if let single = value as? String { return [single] }
        return (value as? [Any])?.compactMap { $0 as? String } ?? []
    }

    private func decode(_ segment: Substring) -> Data? {
        var base64 = segment.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }
}

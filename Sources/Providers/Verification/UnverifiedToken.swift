import BrokerCore

/// What a compact JWS says before it is verified. Only ever a lookup key read ahead of the
/// verification (a web callback reads its state and the account of the posted token's subject
/// in one statement, decision 0039); nothing read here is trusted until the token verified and
/// names the same value.
public enum UnverifiedToken {
    /// The `sub` of the token's payload (at most 255 bytes); nil when the token is not a compact
    /// JWS with a JSON payload that has one.
    public static func subject(_ token: String) -> String? {
        payload(token)?["sub"]?.string(maxBytes: 255)
    }

    /// The `aud` of the token's payload, a string or an array of strings (each at most 255
    /// bytes, at most 8); empty when the token has none it could read. Apple's notifications
    /// are routed by it to the tenants that registered that primary App ID, and then verified
    /// for exactly that audience.
    public static func audiences(_ token: String) -> [String] {
        audiences(payload(token))
    }

    /// The `iss` (at most 255 bytes) and `aud` of the token's payload, read once: which provider
    /// a token exchange's subject token claims to come from, and for which of its clients,
    /// before that provider verifies it.
    public static func issuerAndAudiences(_ token: String) -> (issuer: String?, audiences: [String]) {
        let claims = payload(token)
        return (claims?["iss"]?.string(maxBytes: 255), audiences(claims))
    }

    static func audiences(_ claims: [String: JSONValue]?) -> [String] {
        switch claims?["aud"] {
        case .string(let single)?: return single.utf8.count <= 255 ? [single] : []
        case .array(let values)?: return values.count <= 8 ? values.compactMap { $0.string(maxBytes: 255) } : []
        default: return []
        }
    }

    static func payload(_ token: String) -> [String: JSONValue]? {
        let bytes = Array(token.utf8)
        let dot = UInt8(ascii: ".")
        guard bytes.count <= 16_384, let firstDot = bytes.firstIndex(of: dot),
            let secondDot = bytes[(firstDot + 1)...].firstIndex(of: dot),
            let payload = Base64URL.decode(bytes: bytes[(firstDot + 1)..<secondDot])
        else { return nil }
        return (try? JSONValue.parse(payload))?.object
    }
}

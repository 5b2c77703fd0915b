import BrokerCore

/// What a compact JWS says before it is verified. Only ever a lookup key read ahead of the
/// verification (a web callback reads its state and the account of the posted token's subject
/// in one statement, decision 0039); nothing read here is trusted until the token verified and
/// names the same value.
public enum UnverifiedToken {
    /// The `sub` of the token's payload (at most 255 bytes); nil when the token is not a compact
    /// JWS with a JSON payload that has one.
    public static func subject(_ token: String) -> String? {
        let bytes = Array(token.utf8)
        let dot = UInt8(ascii: ".")
        guard bytes.count <= 16_384, let firstDot = bytes.firstIndex(of: dot),
            let secondDot = bytes[(firstDot + 1)...].firstIndex(of: dot),
            let payload = Base64URL.decode(bytes: bytes[(firstDot + 1)..<secondDot]),
            let object = (try? JSONValue.parse(payload))?.object
        else { return nil }
        return object["sub"]?.string(maxBytes: 255)
    }
}

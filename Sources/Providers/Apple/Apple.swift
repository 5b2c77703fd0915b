import Foundation

/// Sign in with Apple facts (docs/operator-guide.md, decision 0024).
public enum Apple {
    /// The `iss` of Apple identity tokens; also the `aud` of client secrets. It stays this
    /// value when the base URL points at a MockIdP.
    public static let issuer = "https://appleid.apple.com"
    /// `BROKER_APPLE_BASE_URL`'s default.
    public static let defaultBaseURL = "https://appleid.apple.com"
    /// Apple refuses client secrets that live longer than six months.
    public static let maxClientSecretLifetime: TimeInterval = 15_777_000

    public static func keysURL(base: String) -> String { "\(trimmed(base))/auth/keys" }
    public static func tokenURL(base: String) -> String { "\(trimmed(base))/auth/token" }
    public static func revokeURL(base: String) -> String { "\(trimmed(base))/auth/revoke" }
    public static func userMigrationInfoURL(base: String) -> String { "\(trimmed(base))/auth/usermigrationinfo" }
    public static func authorizeURL(base: String) -> String { "\(trimmed(base))/auth/authorize" }

    private static func trimmed(_ base: String) -> String { base.hasSuffix("/") ? String(base.dropLast()) : base }
}

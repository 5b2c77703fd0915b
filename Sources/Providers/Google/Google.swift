/// Google Sign-In facts (docs/operator-guide.md, decision 0024).
public enum Google {
    /// Google writes `iss` in either form.
    public static let issuers: Set<String> = ["accounts.google.com", "https://accounts.google.com"]
    /// `BROKER_GOOGLE_JWKS_URL`'s default.
    public static let defaultKeysURL = "https://www.googleapis.com/oauth2/v3/certs"
    /// `BROKER_GOOGLE_DISCOVERY_URL`'s default: where Google names its authorize and token endpoints.
    public static let defaultDiscoveryURL = "https://accounts.google.com/.well-known/openid-configuration"
    /// The issuer Google's discovery document names.
    public static let discoveryIssuer = "https://accounts.google.com"
}

/// Google Sign-In facts (docs/operator-guide.md, decision 0024).
public enum Google {
    /// Google writes `iss` in either form.
    public static let issuers: Set<String> = ["accounts.google.com", "https://accounts.google.com"]
    /// `BROKER_GOOGLE_JWKS_URL`'s default.
    public static let defaultKeysURL = "https://www.googleapis.com/oauth2/v3/certs"
}

/// Facebook Login facts (docs/operator-guide.md, decision 0024).
public enum Facebook {
    /// The `iss` of Limited Login tokens.
    public static let issuer = "https://www.facebook.com"
    /// `BROKER_FACEBOOK_JWKS_URL`'s default: Limited Login's signing keys.
    public static let defaultKeysURL = "https://limited.facebook.com/.well-known/oauth/openid/jwks/"
    /// `BROKER_FACEBOOK_GRAPH_URL`'s default: Graph API v24.0 (released October 2025; Meta keeps
    /// a version for at least two years).
    public static let defaultGraphURL = "https://graph.facebook.com/v24.0"
}

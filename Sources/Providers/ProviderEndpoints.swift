import BrokerCore

/// Where the broker reaches each provider. Every base URL is configurable so that tests and
/// demos run against MockIdP on loopback.
public struct ProviderEndpoints: Sendable {
    /// `BROKER_APPLE_BASE_URL`: keys at /auth/keys, tokens at /auth/token.
    public var appleBaseURL: String
    /// `BROKER_GOOGLE_JWKS_URL`.
    public var googleKeysURL: String
    /// `BROKER_FACEBOOK_GRAPH_URL`: a versioned Graph API base URL.
    public var facebookGraphURL: String
    /// `BROKER_FACEBOOK_JWKS_URL`: Limited Login's keys.
    public var facebookKeysURL: String
    /// `BROKER_PROVIDER_TIMEOUT`: seconds an outbound call to a provider may take.
    public var timeoutSeconds: Int
    /// `BROKER_GOOGLE_DISCOVERY_URL`: Google's discovery document (its authorize and token
    /// endpoints, for the web flow).
    public var googleDiscoveryURL: String
    /// `BROKER_PUBLIC_URL`: the broker's own base URL; the default redirect URIs of the web
    /// flow (`/apple/callback`, `/oidc/callback`) are under it.
    public var publicURL: String

    public init(
        appleBaseURL: String = Apple.defaultBaseURL, googleKeysURL: String = Google.defaultKeysURL,
        facebookGraphURL: String = Facebook.defaultGraphURL, facebookKeysURL: String = Facebook.defaultKeysURL,
        timeoutSeconds: Int = 10, googleDiscoveryURL: String = Google.defaultDiscoveryURL,
        publicURL: String = "http://127.0.0.1:8080"
    ) {
        self.googleDiscoveryURL = googleDiscoveryURL
        self.publicURL = publicURL.hasSuffix("/") ? String(publicURL.dropLast()) : publicURL
        self.appleBaseURL = appleBaseURL
        self.googleKeysURL = googleKeysURL
        self.facebookGraphURL = facebookGraphURL
        self.facebookKeysURL = facebookKeysURL
        self.timeoutSeconds = timeoutSeconds
    }

    /// Where Apple posts the web flow's answer unless the client registered a redirect URI.
    public var appleCallbackURL: String { publicURL + "/apple/callback" }
    /// Where OpenID Connect providers send the person back unless the operator set one.
    public var oidcCallbackURL: String { publicURL + "/oidc/callback" }
}

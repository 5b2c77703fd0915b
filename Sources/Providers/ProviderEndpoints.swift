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

    public init(
        appleBaseURL: String = Apple.defaultBaseURL, googleKeysURL: String = Google.defaultKeysURL,
        facebookGraphURL: String = Facebook.defaultGraphURL, facebookKeysURL: String = Facebook.defaultKeysURL,
        timeoutSeconds: Int = 10
    ) {
        self.appleBaseURL = appleBaseURL
        self.googleKeysURL = googleKeysURL
        self.facebookGraphURL = facebookGraphURL
        self.facebookKeysURL = facebookKeysURL
        self.timeoutSeconds = timeoutSeconds
    }
}

import AsyncHTTPClient
import BrokerCore
import Foundation
import Logging
import Providers
import Storage

/// Everything a request handler needs, built once per process.
public struct BrokerServices: Sendable {
    public let database: Database
    public let secrets: SecretBox
    /// External base URL, without trailing slash (`BROKER_PUBLIC_URL`).
    public let publicURL: String
    public let maxBodyBytes: Int
    /// Apple's base URL (`BROKER_APPLE_BASE_URL`): keys at /auth/keys, tokens at /auth/token.
    public let appleBaseURL: String
    /// Apple's signing keys, cached; refreshed in the background by ``backgroundTasks()``.
    public let appleKeys: JWKSCache
    let signingKeys: TenantSigningKeys
    let clientSecrets: AppleClientSecrets
    let httpClient: HTTPClient

    public init(
        database: Database, secrets: SecretBox, publicURL: String, maxBodyBytes: Int = 65_536,
        appleBaseURL: String = Apple.defaultBaseURL, appleKeys: JWKSCache? = nil, httpClient: HTTPClient = .shared,
        logger: Logger? = nil
    ) {
        self.database = database
        self.secrets = secrets
        self.publicURL = publicURL
        self.maxBodyBytes = maxBodyBytes
        self.appleBaseURL = appleBaseURL
        self.httpClient = httpClient
        self.appleKeys =
            appleKeys
            ?? JWKSCache(
                source: .url(Apple.keysURL(base: appleBaseURL)), httpClient: httpClient, logger: logger ?? database.logger)
        self.signingKeys = TenantSigningKeys(database: database, secrets: secrets)
        self.clientSecrets = AppleClientSecrets(secrets: secrets)
    }

    public func issuer(for slug: TenantSlug) -> String { "\(publicURL)/t/\(slug.rawValue)" }

    var sessionTokens: SessionTokens { SessionTokens(keys: signingKeys, publicURL: publicURL) }

    var appleSignIn: AppleSignIn {
        AppleSignIn(
            database: database, secrets: secrets, appleKeys: appleKeys,
            tokenClient: AppleTokenClient(baseURL: appleBaseURL, httpClient: httpClient), clientSecrets: clientSecrets,
            tokens: sessionTokens)
    }

    /// Work that runs for the life of the server: refreshing provider key sets.
    public func backgroundTasks() async {
        await appleKeys.runRefreshLoop()
    }
}

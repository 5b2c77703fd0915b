import AsyncHTTPClient
import BrokerCore
import Crypto
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
    /// Seconds during which a just-rotated refresh token still yields its successor
    /// (`BROKER_REFRESH_REUSE_INTERVAL`).
    let refreshReuseInterval: TimeInterval
    /// Derives each refresh token's successor (decision 0017).
    let refreshSuccessorKey: SymmetricKey
    let callers = ExpiringCache<Data, AuthenticatedCaller>(ttl: .seconds(5))
    let appleClients = ExpiringCache<String, ResolvedAppleClient>(ttl: .seconds(5))
    /// Security events no other row records: replays, refused API keys (decision 0020).
    let securityEvents: SecurityEventRecorder

    public init(
        database: Database, secrets: SecretBox, publicURL: String, maxBodyBytes: Int = 65_536,
        appleBaseURL: String = Apple.defaultBaseURL, appleKeys: JWKSCache? = nil, httpClient: HTTPClient = .shared,
        refreshReuseInterval: TimeInterval = BrokerConfiguration.defaultRefreshReuseInterval, logger: Logger? = nil
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
        self.securityEvents = SecurityEventRecorder(database: database)
        self.clientSecrets = AppleClientSecrets(secrets: secrets)
        self.refreshReuseInterval = refreshReuseInterval
        self.refreshSuccessorKey = secrets.derivedKey(purpose: "refresh-token-successor")
    }

    public func issuer(for slug: TenantSlug) -> String { "\(publicURL)/t/\(slug.rawValue)" }

    var sessionTokens: SessionTokens { SessionTokens(keys: signingKeys, publicURL: publicURL) }

    var appleSignIn: AppleSignIn {
        AppleSignIn(
            database: database, secrets: secrets, appleKeys: appleKeys,
            tokenClient: AppleTokenClient(baseURL: appleBaseURL, httpClient: httpClient), clientSecrets: clientSecrets,
            tokens: sessionTokens, clients: appleClients, events: securityEvents)
    }

    /// Work that runs for the life of the server: refreshing provider key sets.
    public func backgroundTasks() async {
        await withDiscardingTaskGroup { group in
            group.addTask { await appleKeys.runRefreshLoop() }
            group.addTask { await database.listenForInvalidations { topic, tenantID in await invalidate(topic, tenantID: tenantID) } }
        }
    }

    /// Drops what a committed change made stale (called for every LISTEN/NOTIFY message).
    func invalidate(_ topic: CacheTopic, tenantID: UUID?) async {
        switch topic {
        case .apiKeys, .tenants:
            if let tenantID { callers.removeAll { _, caller in caller.tenant.id == tenantID } } else { callers.removeAll() }
        case .appleClients:
            if let tenantID { appleClients.removeAll { _, client in client.client.tenantID == tenantID } } else { appleClients.removeAll() }
        case .signingKeys:
            if let tenantID { signingKeys.invalidate(tenantID) } else { signingKeys.invalidateAll() }
        }
    }
}

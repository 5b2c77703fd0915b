import AsyncHTTPClient
import BrokerCore
import Crypto
import Foundation
import Logging
import Providers
import Storage

/// Everything a request handler needs, built once per process: the database, the providers
/// and the application services.
public struct BrokerServices: Sendable {
    public let database: Database
    public let secrets: SecretBox
    /// External base URL, without trailing slash (`BROKER_PUBLIC_URL`).
    public let publicURL: String
    public let maxBodyBytes: Int
    /// Where each provider is reached.
    public let endpoints: ProviderEndpoints
    /// Apple's base URL (`BROKER_APPLE_BASE_URL`): keys at /auth/keys, tokens at /auth/token.
    public var appleBaseURL: String { endpoints.appleBaseURL }
    /// Every provider's key set, fetched at first need and then refreshed in the background by
    /// ``backgroundTasks()``; `/readyz` reports their states (decision 0036).
    public let keySets: ProviderKeySets
    /// Apple's key set (declared in ``keySets`` as `apple`; a test may hand in its own). Every
    /// other type declares its key set when its descriptor builds its provider.
    public let appleKeys: JWKSCache
    /// The provider types (``ProviderRegistry``): `apple`, `google`, `facebook`, `oidc`, and any
    /// `additionalProviderTypes` given (a test's own type).
    public let providers: ProviderRegistry
    package let signingKeys: TenantSigningKeys
    package let httpClient: HTTPClient
    /// Seconds during which a just-rotated refresh token still yields its successor
    /// (`BROKER_REFRESH_REUSE_INTERVAL`).
    package let refreshReuseInterval: TimeInterval
    /// Derives each refresh token's successor (decision 0017).
    package let refreshSuccessorKey: SymmetricKey
    /// API keys this instance found valid lately; with ``unknownKeys``, what the refused-key limit
    /// looks at (decision 0048). Both run on the rate limits' clock, so that a test that holds
    /// that clock still also holds what they remember.
    package let callers: ExpiringCache<Data, AuthenticatedCaller>
    /// Well-formed API keys the database did not know (decision 0048).
    package let unknownKeys: ExpiringCache<Data, Bool>
    /// Hashes of API keys this instance found valid within the hour: such a key is looked up
    /// again when its ``callers`` entry expires without meeting its address's refused-key
    /// budget, which someone else's junk keys may have spent (issue 39 B6). Never cleared by a
    /// revocation: the lookup still decides, and a revoked key is refused.
    package let seenValidKeys: ExpiringCache<Data, Bool>
    /// API keys whose `last_used_at` this instance stamped within the minute.
    package let recentlyUsedKeys = ExpiringCache<UUID, Bool>(ttl: .seconds(60), capacity: 100_000)
    /// Rate limits and the buckets that enforce them (decision 0048).
    public let limiter: RequestLimiter
    package let appleClients = ExpiringCache<String, ResolvedAppleClient>(ttl: .seconds(5))
    package let appleServiceClients = ExpiringCache<UUID, [AppleClient]>(ttl: .seconds(5))
    package let providerConfigurations = ExpiringCache<String, ProviderConfiguration?>(ttl: .seconds(5))
    /// Security events no other row records: replays, refused API keys (decision 0020).
    package let securityEvents: SecurityEventRecorder
    /// Login options and the guideline 4.8 standing of each tenant, cached.
    package let loginCatalogs: LoginCatalogStore
    /// The tenants by slug, cached, for the routes that name their tenant in the path.
    package let tenantDirectory: TenantDirectory
    /// Each tenant's relying parties, cached, for the OpenID Provider's endpoints.
    package let clientDirectory: ClientDirectory
    /// The web flow's derived keys (decision 0038).
    package let webSignInKeys: WebSignInService.Keys
    package let webCallbackRepeats = WebSignInService.Repeats()
    /// Wakes this instance's Apple revocation worker (a deletion queued work).
    package let revocationWake: (stream: AsyncStream<Void>, continuation: AsyncStream<Void>.Continuation) = AsyncStream.makeStream(
        bufferingPolicy: .bufferingNewest(1))
    /// Apple notification routes: primary App ID → tenants and teams.
    package let appleNotificationRoutes = ExpiringCache<String, [AppleNotificationRepository.Route]>(ttl: .seconds(5))
    /// Set once the cache-invalidation listener first listens, after it dropped every cache:
    /// from then on a read is cached unless a change notice overtakes it (decision 0062).
    package let invalidationsListening = OneShot<Void>()
    /// Whether this instance is stopping (``Drain``).
    public let drain = Drain()
    /// The credential-check worker's settings; nil: `broker serve` did not ask for it (tests).
    package let credentialChecks: AppleCredentialChecks?
    /// `BROKER_WEBHOOK_ALLOW_INSECURE`: webhooks may be http:// to loopback or private addresses.
    package let webhookAllowInsecure: Bool
    /// Client secrets for the lifecycle workers' calls to Apple.
    package let appleClientSecrets: AppleClientSecrets

    public init(
        database: Database, secrets: SecretBox, publicURL: String, maxBodyBytes: Int = 65_536,
        appleBaseURL: String? = nil, endpoints: ProviderEndpoints = ProviderEndpoints(), appleKeys: JWKSCache? = nil,
        httpClient: HTTPClient = .providers,
        refreshReuseInterval: TimeInterval = BrokerConfiguration.defaultRefreshReuseInterval, logger: Logger? = nil,
        securityEventSampling: SecurityEventSampling = SecurityEventSampling(),
        additionalProviderTypes: [ProviderDescriptor] = [], appleCredentialChecks: AppleCredentialChecks? = nil,
        webhookAllowInsecure: Bool = false, abuseLimits: AbuseLimits = AbuseLimits(),
        rateLimitClock: @escaping @Sendable () -> Double = TokenBucketClock.monotonicSeconds
    ) {
        self.limiter = RequestLimiter(limits: abuseLimits, now: rateLimitClock)
        let (start, startSeconds) = (ContinuousClock.now, rateLimitClock())
        let keyCacheNow: @Sendable () -> ContinuousClock.Instant = { start + .seconds(rateLimitClock() - startSeconds) }
        self.callers = ExpiringCache(ttl: .seconds(5), now: keyCacheNow)
        self.unknownKeys = ExpiringCache(ttl: .seconds(5), capacity: 50_000, now: keyCacheNow)
        self.seenValidKeys = ExpiringCache(ttl: .seconds(3_600), capacity: 100_000, now: keyCacheNow)
        self.credentialChecks = appleCredentialChecks
        self.webhookAllowInsecure = webhookAllowInsecure
        var endpoints = endpoints
        if let appleBaseURL { endpoints.appleBaseURL = appleBaseURL }
        endpoints.publicURL = publicURL.hasSuffix("/") ? String(publicURL.dropLast()) : publicURL
        let logger = logger ?? database.logger
        self.database = database
        self.secrets = secrets
        self.publicURL = publicURL
        self.maxBodyBytes = maxBodyBytes
        self.endpoints = endpoints
        self.httpClient = httpClient
        let keySets = ProviderKeySets(httpClient: httpClient, logger: logger, fetchTimeout: .seconds(endpoints.timeoutSeconds))
        self.keySets = keySets
        let appleKeys =
            appleKeys.map { keySets.declare("apple", cache: $0) }
            ?? keySets.declare("apple", url: Apple.keysURL(base: endpoints.appleBaseURL))
        self.appleKeys = appleKeys
        var providers = ProviderRegistry.builtIn(
            ProviderContext(endpoints: endpoints, keySets: keySets, secrets: secrets, httpClient: httpClient, logger: logger))
        for descriptor in additionalProviderTypes { providers.register(descriptor) }
        self.providers = providers
        self.signingKeys = TenantSigningKeys(database: database, secrets: secrets)
        self.securityEvents = SecurityEventRecorder(database: database, sampling: securityEventSampling)
        self.loginCatalogs = LoginCatalogStore(database: database)
        self.refreshReuseInterval = refreshReuseInterval
        self.refreshSuccessorKey = secrets.derivedKey(purpose: "refresh-token-successor")
        self.webSignInKeys = WebSignInService.Keys(secrets: secrets)
        self.tenantDirectory = TenantDirectory(database: database)
        self.clientDirectory = ClientDirectory(database: database)
        self.appleClientSecrets = AppleClientSecrets(secrets: secrets)
    }

    public func issuer(for slug: TenantSlug) -> String { "\(publicURL)/t/\(slug.rawValue)" }

    package var sessionTokens: SessionTokens { SessionTokens(keys: signingKeys, publicURL: publicURL) }

    package var providerSettings: ProviderSettingsStore {
        ProviderSettingsStore(
            database: database, appleClients: appleClients, appleServiceClients: appleServiceClients,
            configurations: providerConfigurations)
    }

    package var signIn: SignInService {
        SignInService(
            database: database, providers: providers, store: providerSettings, tokens: sessionTokens, events: securityEvents,
            loginCatalogs: loginCatalogs)
    }

    package var webSignIn: WebSignInService {
        WebSignInService(
            database: database, providers: providers, store: providerSettings, signIn: signIn, secrets: secrets, events: securityEvents,
            tenants: tenantDirectory, keys: webSignInKeys, repeats: webCallbackRepeats)
    }

    /// The authorization endpoint of each tenant's OpenID Provider (decision 0082).
    package var authorization: AuthorizationService {
        AuthorizationService(
            database: database, tenants: tenantDirectory, clients: clientDirectory, webSignIn: webSignIn, loginCatalogs: loginCatalogs,
            publicURL: publicURL)
    }

    /// The token endpoint of each tenant's OpenID Provider (decision 0082).
    package var tokenEndpoint: TokenService {
        TokenService(
            database: database, tenants: tenantDirectory, clients: clientDirectory, webSignIn: webSignIn, sessions: sessions,
            tokens: sessionTokens)
    }

    /// The end-session endpoint of each tenant's OpenID Provider (decision 0082).
    package var logout: LogoutService {
        LogoutService(database: database, tenants: tenantDirectory, clients: clientDirectory, tokens: sessionTokens)
    }

    /// The userinfo endpoint of each tenant's OpenID Provider (decision 0082).
    package var userInfo: UserInfoService { UserInfoService(database: database, tenants: tenantDirectory, tokens: sessionTokens) }

    package var identityLinks: IdentityLinkService {
        IdentityLinkService(
            database: database, providers: providers, store: providerSettings, tokens: sessionTokens, events: securityEvents)
    }

    package var accountDeletions: AccountDeletionService {
        let signal = revocationWake.continuation
        return AccountDeletionService(database: database, secrets: secrets, queued: { signal.yield() })
    }

    package var appleNotifications: AppleNotificationService {
        AppleNotificationService(database: database, appleKeys: appleKeys, routes: appleNotificationRoutes, logger: database.logger)
    }

    package func appleCredentialChecker(_ settings: AppleCredentialChecks) -> AppleCredentialChecker {
        AppleCredentialChecker(
            database: database, store: providerSettings, secrets: secrets,
            tokenClient: AppleTokenClient(
                baseURL: endpoints.appleBaseURL, httpClient: httpClient, timeout: .seconds(endpoints.timeoutSeconds)),
            clientSecrets: appleClientSecrets, settings: settings, logger: database.logger)
    }

    package var appleRevocationWorker: AppleRevocationWorker {
        AppleRevocationWorker(
            database: database, store: providerSettings, secrets: secrets,
            tokenClient: AppleTokenClient(
                baseURL: endpoints.appleBaseURL, httpClient: httpClient, timeout: .seconds(endpoints.timeoutSeconds)),
            clientSecrets: appleClientSecrets, logger: database.logger)
    }

    package func appleTeamTransfer(actor: String) -> AppleTeamTransfer {
        AppleTeamTransfer(
            database: database,
            tokenClient: AppleTokenClient(
                baseURL: endpoints.appleBaseURL, httpClient: httpClient, timeout: .seconds(endpoints.timeoutSeconds)),
            clientSecrets: appleClientSecrets, actor: actor, logger: database.logger)
    }

    package var webhookDeliveries: WebhookDeliveryWorker {
        WebhookDeliveryWorker(database: database, secrets: secrets, allowInsecure: webhookAllowInsecure, logger: database.logger)
    }

    package var sessions: SessionService {
        SessionService(
            database: database, tokens: sessionTokens, refreshReuseInterval: refreshReuseInterval,
            successorKey: refreshSuccessorKey)
    }

    /// Work that runs for the life of the server: refreshing the provider key sets once needed,
    /// clearing caches.
    /// Runs the workers, sweeps and listeners until cancelled, or until `stop` is requested:
    /// then they take nothing new, and return once the calls in flight (an Apple revocation or
    /// credential check, webhook deliveries) finished and were recorded (issue 39 D11). The
    /// caller bounds that wait by cancelling: a call cancelled gives its lease back.
    public func backgroundTasks(stop: GracefulStop = GracefulStop()) async {
        await TenantScope.acrossTenants(because: "the workers and sweeps serve every tenant's queues and rows") {
            await workers(stop: stop)
        }
    }

    private func workers(stop: GracefulStop) async {
        await withDiscardingTaskGroup { group in
            // Work that holds no lease ends at once.
            group.addTask { await stop.cancelling { await keySets.runBackground() } }
            group.addTask { await stop.cancelling { await sweepWebSignIns() } }
            group.addTask { await stop.cancelling { await sweepFinishedLifecycleRecords() } }
            group.addTask { await stop.cancelling { await purgeEndedSessions() } }
            group.addTask {
                await stop.cancelling {
                    await database.listenForInvalidations(listening: { invalidationsListening.fulfil(.success(())) }) { topic, tenantID in
                        await invalidate(topic, tenantID: tenantID)
                    }
                }
            }
            // Workers finish the call in flight.
            group.addTask { await appleRevocationWorker.run(wake: revocationWake.stream, signal: revocationWake.continuation, stop: stop) }
            if let credentialChecks { group.addTask { await appleCredentialChecker(credentialChecks).run(stop: stop) } }
            group.addTask { await webhookDeliveries.run(stop: stop) }
        }
    }

    /// Deletes web sign-in states and broker codes past their time, once a minute (decision 0038).
    func sweepWebSignIns() async {
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: .seconds(60))
                try await database.webSignIns.deleteExpired(before: Date())
            } catch is CancellationError {
                return
            } catch {
                database.logger.debug("could not sweep expired web sign-ins", metadata: ["error": "\(String(describing: type(of: error)))"])
            }
        }
    }

    /// Deletes finished lifecycle records past ``RetentionSweep/period`` once an hour (and at
    /// start), as long as each pass finds a full batch.
    func sweepFinishedLifecycleRecords() async {
        while !Task.isCancelled {
            do {
                var swept = try await database.retention.sweep(olderThan: Date().addingTimeInterval(-RetentionSweep.period))
                while max(swept.receipts, swept.revocations, swept.deliveries) >= 10_000 {
                    swept = try await database.retention.sweep(olderThan: Date().addingTimeInterval(-RetentionSweep.period))
                }
                try await Task.sleep(for: .seconds(3_600))
            } catch is CancellationError {
                return
            } catch {
                database.logger.debug(
                    "could not sweep finished lifecycle records", metadata: ["error": "\(String(describing: type(of: error)))"])
                try? await Task.sleep(for: .seconds(3_600))
            }
        }
    }

    /// Deletes ended sessions and spent refresh tokens (``SessionPurge``) once an hour. The first
    /// pass comes at a random time within the first hour, so instances started together do not
    /// walk the table together; a pass is idempotent, so two that meet only skip each other's rows.
    func purgeEndedSessions() async {
        do { try await Task.sleep(for: .seconds(Int.random(in: 60...3_600))) } catch { return }
        while !Task.isCancelled {
            do {
                let purged = try await database.sessionPurge.pass()
                if purged.sessions + purged.refreshTokens > 0 {
                    database.logger.info(
                        "purged ended sessions", metadata: ["sessions": "\(purged.sessions)", "refresh_tokens": "\(purged.refreshTokens)"])
                }
                try await Task.sleep(for: .seconds(3_600))
            } catch is CancellationError {
                return
            } catch {
                database.logger.debug("could not purge ended sessions", metadata: ["error": "\(String(describing: type(of: error)))"])
                try? await Task.sleep(for: .seconds(3_600))
            }
        }
    }

    /// Drops what a committed change made stale (called for every LISTEN/NOTIFY message).
    package func invalidate(_ topic: CacheTopic, tenantID: UUID?) async {
        if topic != .apiKeys, topic != .signingKeys, topic != .oauthClients { loginCatalogs.invalidate(tenantID: tenantID) }
        switch topic {
        case .oauthClients:
            clientDirectory.invalidate(tenantID: tenantID)
        case .apiKeys, .tenants:
            if topic == .tenants {
                tenantDirectory.invalidate()
                clientDirectory.invalidate(tenantID: tenantID)
            }
            if let tenantID { callers.removeAll { _, caller in caller.tenant.id == tenantID } } else { callers.removeAll() }
        case .appleClients:
            if let tenantID { appleClients.removeAll { _, client in client.client.tenantID == tenantID } } else { appleClients.removeAll() }
            if let tenantID { appleServiceClients.removeAll { key, _ in key == tenantID } } else { appleServiceClients.removeAll() }
            appleNotificationRoutes.removeAll()
        case .providerConfigs:
            if let tenantID {
                let prefix = ProviderSettingsStore.cacheKeyPrefix(tenantID)
                providerConfigurations.removeAll { key, _ in key.hasPrefix(prefix) }
            } else {
                providerConfigurations.removeAll()
            }
        case .signingKeys:
            if let tenantID { signingKeys.invalidate(tenantID) } else { signingKeys.invalidateAll() }
        }
    }
}

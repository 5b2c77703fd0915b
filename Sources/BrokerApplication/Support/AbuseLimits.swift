import BrokerCore
import Foundation

/// How much one caller may ask of this instance (decision 0048). Every limit is per instance:
/// N instances behind a balancer let a caller N times as much.
public struct AbuseLimits: Sendable {
    /// Each API key's token bucket unless its tenant sets its own (`broker tenant set
    /// --rate-limit`); `BROKER_API_KEY_RATE_LIMIT` / `BROKER_API_KEY_RATE_BURST` (200/s, burst 400).
    public var apiKey: RateLimit
    /// Each client address on the public routes (`BROKER_PUBLIC_RATE_LIMIT` /
    /// `BROKER_PUBLIC_RATE_BURST`, 50/s, burst 100).
    public var publicRoutes: RateLimit
    /// Each client address's refused API-key authentications; once it runs out, that address's
    /// requests with a key this instance does not know answer 429 without a lookup
    /// (`BROKER_FAILED_AUTH_RATE_LIMIT` / `BROKER_FAILED_AUTH_RATE_BURST`, 5/s, burst 20).
    public var failedAuthentication: RateLimit
    /// Which peers' `X-Forwarded-For` is believed (`BROKER_TRUSTED_PROXIES`).
    public var clientAddresses: ClientAddressResolver

    public static let defaultAPIKey = RateLimit(perSecond: 200, burst: 400)
    public static let defaultPublicRoutes = RateLimit(perSecond: 50, burst: 100)
    public static let defaultFailedAuthentication = RateLimit(perSecond: 5, burst: 20)

    public init(
        apiKey: RateLimit = defaultAPIKey, publicRoutes: RateLimit = defaultPublicRoutes,
        failedAuthentication: RateLimit = defaultFailedAuthentication, clientAddresses: ClientAddressResolver = ClientAddressResolver()
    ) {
        self.apiKey = apiKey
        self.publicRoutes = publicRoutes
        self.failedAuthentication = failedAuthentication
        self.clientAddresses = clientAddresses
    }

    /// Limits no test or benchmark reaches (a caller that measures something else).
    public static let unlimited = AbuseLimits(
        apiKey: RateLimit(perSecond: 1_000_000, burst: 2_000_000), publicRoutes: RateLimit(perSecond: 1_000_000, burst: 2_000_000),
        failedAuthentication: RateLimit(perSecond: 1_000_000, burst: 2_000_000))
}

/// The buckets of ``AbuseLimits`` (in memory, this process's).
public final class RequestLimiter: Sendable {
    package let limits: AbuseLimits
    let apiKeys: TokenBuckets<UUID>
    let publicRoutes: TokenBuckets<String>
    let failures: TokenBuckets<String>

    package init(limits: AbuseLimits, now: @escaping @Sendable () -> Double = TokenBucketClock.monotonicSeconds) {
        self.limits = limits
        self.apiKeys = TokenBuckets(now: now)
        self.publicRoutes = TokenBuckets(now: now)
        self.failures = TokenBuckets(now: now)
    }

    /// Takes a token of the key's bucket (its tenant's rate, else the instance's); throws
    /// `rate_limited` when there is none.
    package func admit(apiKey: APIKeyRecord, tenant: Tenant) throws(BrokerError) {
        if case .limited(let after) = apiKeys.take(apiKey.id, limit: tenant.rateLimit ?? limits.apiKey) {
            throw BrokerError.rateLimited(retryAfter: after, limit: "api_key")
        }
    }

    /// Takes a token of the client address's bucket on a public route.
    package func admitPublic(client: String?) throws(BrokerError) {
        guard let client else { return }
        if case .limited(let after) = publicRoutes.take(client, limit: limits.publicRoutes) {
            throw BrokerError.rateLimited(retryAfter: after, limit: "public_ip")
        }
    }

    /// Whether the address may still try keys this instance does not know.
    package func mayTryUnknownKeys(client: String?) -> Bool {
        guard let client else { return true }
        return failures.hasToken(client, limit: limits.failedAuthentication)
    }

    /// Counts a refused authentication against the address; the answer once it runs out.
    package func authenticationRefused(client: String?) -> BrokerError? {
        guard let client else { return nil }
        if case .limited(let after) = failures.take(client, limit: limits.failedAuthentication) {
            return BrokerError.rateLimited(retryAfter: after, limit: "failed_authentication")
        }
        return nil
    }
}

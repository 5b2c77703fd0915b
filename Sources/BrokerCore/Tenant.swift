import Foundation

public enum TenantStatus: String, Sendable, Codable {
    case active
    case disabled
}

/// Session settings a tenant can tune: access and refresh token lifetimes and audiences.
public struct SessionSettings: Sendable, Equatable, Codable {
    /// Lifetime of an access token, in seconds (default 15 minutes).
    public var accessTokenTTL: Int
    /// Absolute lifetime of a refresh-token family, in seconds (default 60 days).
    public var refreshTokenAbsoluteTTL: Int
    /// Idle lifetime of a refresh token, in seconds (default 30 days).
    public var refreshTokenIdleTTL: Int
    /// The `aud` claim of access tokens; empty means "the tenant slug".
    public var audiences: [String]
    /// Open sessions an account may have; a sign-in past it revokes the oldest (default 100).
    public var maxSessionsPerAccount: Int

    /// What `--max-sessions-per-account` may be.
    public static let allowedMaxSessions = 1...10_000

    public static let `default` = SessionSettings(
        accessTokenTTL: 900,
        refreshTokenAbsoluteTTL: 60 * 86_400,
        refreshTokenIdleTTL: 30 * 86_400,
        audiences: []
    )

    public init(
        accessTokenTTL: Int, refreshTokenAbsoluteTTL: Int, refreshTokenIdleTTL: Int, audiences: [String], maxSessionsPerAccount: Int = 100
    ) {
        self.accessTokenTTL = accessTokenTTL
        self.refreshTokenAbsoluteTTL = refreshTokenAbsoluteTTL
        self.refreshTokenIdleTTL = refreshTokenIdleTTL
        self.audiences = audiences
        self.maxSessionsPerAccount = maxSessionsPerAccount
    }
}

/// Account-linking settings of a tenant.
public struct LinkingSettings: Sendable, Equatable, Codable {
    /// Link a new provider identity to an existing account with the same verified email.
    /// Off by default; never applies to Apple private-relay addresses.
    public var autoLinkVerifiedEmail: Bool

    public static let `default` = LinkingSettings(autoLinkVerifiedEmail: false)

    public init(autoLinkVerifiedEmail: Bool) {
        self.autoLinkVerifiedEmail = autoLinkVerifiedEmail
    }
}

public struct Tenant: Sendable, Equatable, Identifiable {
    public var id: UUID
    public var slug: TenantSlug
    public var displayName: String
    public var status: TenantStatus
    public var session: SessionSettings
    public var linking: LinkingSettings
    /// The guideline 4.8 policy the tenant is held to.
    public var policy: LoginPolicySettings
    /// Seconds a newly rotated signing key is published as `next` before it signs.
    public var keyActivationDelay: Int
    /// Each API key's token bucket; nil: the instance's default (decision 0048).
    public var rateLimit: RateLimit?
    public var createdAt: Date
    public var updatedAt: Date

    public init(
        id: UUID, slug: TenantSlug, displayName: String, status: TenantStatus,
        session: SessionSettings, linking: LinkingSettings, policy: LoginPolicySettings = .default, keyActivationDelay: Int,
        createdAt: Date, updatedAt: Date
    ) {
        self.id = id
        self.slug = slug
        self.displayName = displayName
        self.status = status
        self.session = session
        self.linking = linking
        self.policy = policy
        self.keyActivationDelay = keyActivationDelay
        self.rateLimit = nil
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    /// The audiences put in access tokens: the configured ones, or the slug.
    public var effectiveAudiences: [String] {
        session.audiences.isEmpty ? [slug.rawValue] : session.audiences
    }
}

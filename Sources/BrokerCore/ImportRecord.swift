import Foundation

/// One person of an import (issue 24): the account the source system had, under the id it gave
/// it, with the social identities it had linked. Every source format (Firebase, Auth0, Supabase,
/// the broker's own JSON lines) reads into this.
public struct ImportRecord: Sendable, Equatable {
    /// The source system's user id (Firebase `localId`, Auth0 `user_id`, Supabase `id`, or the
    /// product's own): unique per tenant, stored on the account.
    public var externalID: String
    public var email: String?
    public var emailVerified: Bool
    public var name: PersonName
    /// `active` or `disabled` (a blocked or disabled user in the source).
    public var status: AccountStatus
    /// When the source created the person; the account's `created_at` (now when absent).
    public var createdAt: Date?
    public var identities: [ImportIdentity]
    /// The source also held a password (or a phone login) for this person: counted, never
    /// imported (this broker holds no passwords).
    public var hadPasswordOrPhone: Bool

    public init(
        externalID: String, email: String? = nil, emailVerified: Bool = false,
        name: PersonName = PersonName(givenName: nil, familyName: nil),
        status: AccountStatus = .active, createdAt: Date? = nil, identities: [ImportIdentity], hadPasswordOrPhone: Bool = false
    ) {
        self.externalID = externalID
        self.email = email
        self.emailVerified = emailVerified
        self.name = name
        self.status = status
        self.createdAt = createdAt
        self.identities = identities
        self.hadPasswordOrPhone = hadPasswordOrPhone
    }
}

/// One social identity of an imported person, as the source names it. `provider` is the
/// source's name until the import resolves it to one of the tenant's provider ids and scopes.
public struct ImportIdentity: Sendable, Equatable {
    public var provider: String
    public var subject: String
    /// Where `subject` is unique (Apple's team, Facebook's app id, an OpenID issuer); nil: the
    /// tenant's configuration decides.
    public var providerScope: String?
    public var email: String?
    public var emailVerified: Bool
    public var isPrivateEmail: Bool
    /// A refresh token the source obtained with the same client (Apple), kept sealed.
    public var providerRefreshToken: String?

    public init(
        provider: String, subject: String, providerScope: String? = nil, email: String? = nil, emailVerified: Bool = false,
        isPrivateEmail: Bool = false, providerRefreshToken: String? = nil
    ) {
        self.provider = provider
        self.subject = subject
        self.providerScope = providerScope
        self.email = email
        self.emailVerified = emailVerified
        self.isPrivateEmail = isPrivateEmail
        self.providerRefreshToken = providerRefreshToken
    }
}

/// What a source line or element became: a record to import, a person skipped with the reason
/// (no social identity), or an error with the reason.
public enum ImportItem: Sendable, Equatable {
    case record(ImportRecord)
    case skipped(externalID: String?, reason: String)
    case error(String)
}
